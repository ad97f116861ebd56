// Plain TCP clients for tests that need what an HTTP library hides: idle peers, a small
// receive buffer, a client that never reads, and a receive timeout that turns a server that
// never answers into a failure instead of a hang.
#pragma once

#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace pagoda::testing {

// A blocking TCP connection to 127.0.0.1:`port` whose sends and receives give up after
// `timeout`; `receive_buffer` > 0 sets SO_RCVBUF before connecting. -1 on failure.
int ConnectLoopback(int port, absl::Duration timeout = absl::Seconds(5), int receive_buffer = 0);
// Sends all of `bytes` on `fd`; false on an error or timeout.
bool SendAll(int fd, std::string_view bytes);

// What a connection delivered until it ended.
struct RawRead {
  std::string data;
  bool closed = false;  // the peer closed or reset it (false: a receive timed out or failed)
};
// Reads `fd` until the peer closes it or a receive times out.
RawRead ReadUntilClosed(int fd);

struct RawReply {
  int status = -1;   // -1: no complete answer (no connection, or a receive timed out)
  std::string head;  // status line and headers
  std::string body;
};
// Sends `method path` (with `body`, if any) on a new connection with "Connection: close"
// and reads the answer to its end, each receive giving up after `timeout`.
RawReply RawHttp(int port, const std::string& method, const std::string& path,
                 const std::string& body = "", absl::Duration timeout = absl::Seconds(5));
// The payload of a chunked body (RawReply::body of a streamed answer), up to its last chunk.
std::string Dechunked(std::string_view chunked);

}  // namespace pagoda::testing
