#include "tests/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pagoda::testing {

int ConnectLoopback(int port, absl::Duration timeout, int receive_buffer) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (receive_buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

RawRead ReadUntilClosed(int fd) {
  RawRead out;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      out.data.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    out.closed = n == 0 || errno == ECONNRESET;
    return out;
  }
}

RawReply RawHttp(int port, const std::string& method, const std::string& path,
                 const std::string& body, absl::Duration timeout) {
  RawReply reply;
  const int fd = ConnectLoopback(port, timeout);
  if (fd < 0) return reply;
  std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  if (!body.empty()) {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  const bool sent = SendAll(fd, request);
  const RawRead read = sent ? ReadUntilClosed(fd) : RawRead();
  close(fd);
  const size_t end = read.data.find("\r\n\r\n");
  // "HTTP/1.1 200 OK": the three digits after the first space.
  if (!read.closed || end == std::string::npos || read.data.size() < 12) return reply;
  if (!absl::SimpleAtoi(absl::string_view(read.data).substr(9, 3), &reply.status)) return reply;
  reply.head = read.data.substr(0, end);
  reply.body = read.data.substr(end + 4);
  return reply;
}

std::string Dechunked(std::string_view chunked) {
  std::string out;
  while (true) {
    const size_t eol = chunked.find("\r\n");
    size_t size = 0;
    if (eol == std::string_view::npos ||
        !absl::SimpleHexAtoi(absl::string_view(chunked.data(), eol), &size) || size == 0) {
      return out;
    }
    out.append(chunked.substr(eol + 2, size));
    chunked.remove_prefix(std::min(chunked.size(), eol + 2 + size + 2));
  }
}

}  // namespace pagoda::testing
