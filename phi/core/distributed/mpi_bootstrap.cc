// A store for a job that mpirun started without MASTER_ADDR / MASTER_PORT: mpirun numbers
// the ranks, and MPI itself carries the store's address from rank 0 to the others.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <glog/logging.h>

#include "phi/core/distributed/mpi_comm_context.h"
#include "phi/core/distributed/mpi_comm_context_internal.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_utils.h"

namespace phi {
namespace distributed {
namespace {

bool IsSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

bool MpiJobWithoutStoreAddress() {
  return IsSet("OMPI_COMM_WORLD_RANK") && !IsSet("MASTER_ADDR") && !IsSet("MASTER_PORT") &&
         !IsSet("PADDLE_MASTER");
}

RendezvousResult MpiRendezvous(std::chrono::milliseconds timeout) {
  RendezvousResult r;
  r.rank = MpiWorldRank();
  r.world_size = MpiWorldSize();
  const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  r.local_rank = lr != nullptr ? std::atoi(lr) : r.rank;
  // One node: loopback. Several: rank 0's host name, which the others must resolve to an
  // address of rank 0 (where it does not, set MASTER_ADDR and MASTER_PORT instead).
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const bool one_node = local_size != nullptr && std::atoi(local_size) == r.world_size;
  char address[256] = {0};  // "host:port" of rank 0's server
  TCPStoreOptions o;
  o.timeout = timeout;
  o.linger = false;  // the ranks meet in MPI_Finalize; mpirun ends the job on a failure
  std::shared_ptr<TCPStore> master;
  if (r.rank == 0) {
    o.host = "127.0.0.1";
    if (!one_node) {
      char host[200] = {0};
      gethostname(host, sizeof(host) - 1);
      o.host = host;
    }
    o.port = 0;
    o.is_master = true;
    master = std::make_shared<TCPStore>(o);  // picks a free port
    std::snprintf(address, sizeof(address), "%s:%u", o.host.c_str(),
                  static_cast<unsigned>(master->port()));
  }
  CheckMpi(MPI_Bcast(address, sizeof(address), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast",
           "the store's address");
  if (master) {
    r.store = master;
  } else {
    std::string port;
    PADDLE_ENFORCE(tcputils::SplitHostPort(address, &o.host, &port),
                   errors::External("MPI rendezvous: rank 0 sent a malformed store address '%s'.",
                                    address));
    o.port = static_cast<uint16_t>(std::atoi(port.c_str()));
    r.store = std::make_shared<TCPStore>(o);
  }
  VLOG(1) << "MPI rendezvous: rank " << r.rank << "/" << r.world_size << ", store at "
          << address;
  return r;
}

}  // namespace distributed
}  // namespace phi
