// How a request's body is delimited (RFC 9112 §6), checked once its header is read and
// before any of its body is: a request whose framing is ambiguous is refused and its
// connection closed, so no byte of its body can be read as the next request (smuggling).
#pragma once

#include <boost/beast/http/message.hpp>

#include "absl/status/status.h"

namespace pagoda::server::http {

// OK without Transfer-Encoding (Content-Length, or no body), or with exactly the coding
// `chunked` (case-insensitive, over one or more header lines). InvalidArgument (400) for
// Transfer-Encoding in HTTP/1.0, together with Content-Length, without `chunked` as its
// final coding, or with `chunked` twice; Unimplemented (501) for any other coding before
// the final `chunked` (gzip, deflate, ...: the server decodes none).
absl::Status CheckRequestFraming(const boost::beast::http::request_header<>& header);

}  // namespace pagoda::server::http
