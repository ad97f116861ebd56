#include "server/http/cors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda::server::http {
namespace {

// Header values echoed back must not split the response: no CR or LF.
bool SafeHeaderValue(std::string_view value) {
  return value.find_first_of("\r\n") == std::string_view::npos;
}

}  // namespace

std::optional<std::string> CorsAllowOrigin(const std::vector<std::string>& allowed,
                                           std::string_view origin) {
  if (origin.empty() || !SafeHeaderValue(origin)) return std::nullopt;
  if (std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) {
    return std::string(origin);
  }
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return "*";
  return std::nullopt;
}

std::string CorsHeaders(const std::string& allow_origin) {
  std::string out = absl::StrCat("Access-Control-Allow-Origin: ", allow_origin, "\r\n");
  if (allow_origin != "*") out += "Vary: Origin\r\n";
  return out;
}

std::string CorsPreflightHeaders(const std::string& allow_origin,
                                 std::string_view request_headers) {
  const std::string_view headers = !request_headers.empty() && SafeHeaderValue(request_headers)
                                       ? request_headers
                                       : std::string_view("Authorization, Content-Type");
  return absl::StrCat(CorsHeaders(allow_origin),
                      "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
                      "Access-Control-Allow-Headers: ",
                      std::string(headers), "\r\nAccess-Control-Max-Age: 600\r\n");
}

CorsOutcome CorsFor(const std::vector<std::string>& allowed, std::string_view origin,
                    bool preflight, std::string_view request_headers) {
  CorsOutcome out{.preflight = preflight};
  if (const std::optional<std::string> allow = CorsAllowOrigin(allowed, origin)) {
    out.headers = preflight ? CorsPreflightHeaders(*allow, request_headers) : CorsHeaders(*allow);
  }
  return out;
}

}  // namespace pagoda::server::http
