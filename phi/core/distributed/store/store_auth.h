// Shared-secret authentication for the TCPStore.
//
// When PADDLE_STORE_TOKEN is set where the server runs, the server's hello carries a fresh
// random nonce and a client must answer HMAC-SHA256(token, nonce) before any request is
// served. The token itself never crosses the wire and a recorded answer is useless for the
// next connection. This is authentication only: traffic is not encrypted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace phi {
namespace distributed {

constexpr const char* kStoreTokenEnv = "PADDLE_STORE_TOKEN";

// The token from PADDLE_STORE_TOKEN, or "" (open store) when unset or empty.
std::string StoreTokenFromEnv();

std::vector<uint8_t> Sha256(const uint8_t* data, size_t size);
std::vector<uint8_t> HmacSha256(const std::string& key, const std::vector<uint8_t>& message);
// Compares without an early exit so the time taken says nothing about where they differ.
bool ConstantTimeEquals(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);
// Cryptographically random bytes (getrandom); raises phi::ExternalError when unavailable.
std::vector<uint8_t> RandomBytes(size_t n);

}  // namespace distributed
}  // namespace phi
