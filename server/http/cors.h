// Cross-origin requests from browsers (--cors-allow-origin): which Origin a response
// allows, and the headers of a preflight (OPTIONS) answer. Off unless origins are given.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::server::http {

// The Access-Control-Allow-Origin value for a request from `origin` (its Origin header):
// the origin itself when `allowed` lists it (exact, case-sensitive match), "*" when
// `allowed` lists "*" (the operator's explicit choice); nullopt otherwise, and always
// for an empty `origin`.
std::optional<std::string> CorsAllowOrigin(const std::vector<std::string>& allowed,
                                           std::string_view origin);

// Header lines (CRLF-terminated) an allowed origin gets on every response:
// Access-Control-Allow-Origin and, unless it is "*", "Vary: Origin".
std::string CorsHeaders(const std::string& allow_origin);

// Header lines of the answer to a preflight from an allowed origin: CorsHeaders plus
// Access-Control-Allow-Methods (GET, POST, OPTIONS), Access-Control-Allow-Headers (the
// request's Access-Control-Request-Headers when given, else "Authorization, Content-Type")
// and Access-Control-Max-Age (600 s).
std::string CorsPreflightHeaders(const std::string& allow_origin, std::string_view request_headers);

// What a request from `origin` gets (`preflight`: it is an OPTIONS request): the CORS header
// lines of its answer ("" for an origin not allowed); a preflight is answered 204 with them,
// or refused when they are empty.
struct CorsOutcome {
  std::string headers;
  bool preflight = false;
};
CorsOutcome CorsFor(const std::vector<std::string>& allowed, std::string_view origin,
                    bool preflight, std::string_view request_headers);

}  // namespace pagoda::server::http
