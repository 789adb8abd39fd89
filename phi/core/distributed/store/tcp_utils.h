// Socket helpers shared by the TCPStore client and server (Paddle calls its own tcp_utils).
// Everything here reports failures as return values plus a message; the callers add the
// store-level context (host:port, key, elapsed time) before raising.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace phi {
namespace distributed {
namespace tcputils {

using Clock = std::chrono::steady_clock;

// "host:port", with brackets for IPv6 literals.
std::string HostPort(const std::string& host, uint16_t port);
// The inverse: "host:port" or "[v6]:port" into its parts (brackets removed). False when
// malformed (no port, an empty host, an unclosed bracket). The one parser of such addresses.
bool SplitHostPort(const std::string& s, std::string* host, std::string* port);

// Binds and listens on exactly the given address (port 0 = a free port chosen by the
// kernel). SO_REUSEADDR so a restarted server can take the port of a dead one at once.
// Returns the fd (non-blocking, close-on-exec) or -1 with *error.
int Listen(const std::string& host, uint16_t port, std::string* error);
// The local port a socket is bound to, 0 on failure.
uint16_t LocalPort(int fd);
// A connected socket's own ("local") or its peer's address as numeric "ip:port" (an
// IPv4-mapped IPv6 address is written as IPv4, so both ends of a connection spell it the
// same way); "" on failure.
std::string Endpoint(int fd, bool peer);

// One connection attempt to every address host resolves to, until deadline. Returns a
// connected non-blocking fd or -1 with *error describing the last failure.
int ConnectOnce(const std::string& host, uint16_t port, Clock::time_point deadline,
                std::string* error);

bool SetNonBlocking(int fd);
void SetNoDelay(int fd);

// Writes all bytes before deadline (poll + send with MSG_NOSIGNAL). False with *error on
// failure or timeout.
bool SendAll(int fd, const uint8_t* data, size_t size, Clock::time_point deadline,
             std::string* error);
// Reads at least one byte (up to cap) before deadline. Returns bytes read, 0 on orderly
// close by the peer, -1 with *error on failure, -2 on timeout.
long RecvSome(int fd, uint8_t* buf, size_t cap, Clock::time_point deadline,
              std::string* error);

// Milliseconds from now until deadline, clamped to [0, INT_MAX] for poll().
int MillisUntil(Clock::time_point deadline);

}  // namespace tcputils
}  // namespace distributed
}  // namespace phi
