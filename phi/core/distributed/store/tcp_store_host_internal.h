// What a hosting TCPStore needs to know about this process's other stores (internal to the
// TCPStore: tcp_store.cc and tcp_store_host.cc). A store host (a master) keeps serving,
// when it is destroyed or the process exits, while clients of *other* processes still use
// it (FLAGS_store_host_linger_s): the ranks still running can then name what failed through
// the store. Telling this process's own connections from theirs takes a registry of the
// client endpoints of this process.
#pragma once

#include <string>

namespace phi {
namespace distributed {

class TCPStore;

namespace storehost {

// A client of this process connected from `endpoint` ("host:port") / disconnected.
void NoteClientEndpoint(const std::string& endpoint);
void ForgetClientEndpoint(const std::string& endpoint);
// A lingering master of this process (kept for other processes at exit), and its end.
void RegisterMaster(TCPStore* master);
void UnregisterMaster(TCPStore* master);

}  // namespace storehost
}  // namespace distributed
}  // namespace phi
