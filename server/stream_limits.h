// The default bound on output a client leaves unread, one constant for both doors and the
// CLI (ServerOptions, HttpContext's options, GenerateStream, --max-unsent-bytes-per-stream).
#pragma once

#include <cstdint>

namespace pagoda::server {

inline constexpr int64_t kDefaultMaxUnsentBytesPerStream = int64_t{1} << 20;

}  // namespace pagoda::server
