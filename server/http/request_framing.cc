#include "server/http/request_framing.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pagoda::server::http {
namespace {

namespace bhttp = boost::beast::http;

// The transfer codings of every Transfer-Encoding line, in order, each as sent (with its
// parameters, if any); empty list elements are skipped (RFC 9110 §5.6.1).
std::vector<std::string> Codings(const bhttp::request_header<>& header) {
  std::vector<std::string> codings;
  auto [begin, end] = header.equal_range(bhttp::field::transfer_encoding);
  for (auto it = begin; it != end; ++it) {
    const absl::string_view value(it->value().data(), it->value().size());
    for (absl::string_view element : absl::StrSplit(value, ',')) {
      element = absl::StripAsciiWhitespace(element);
      if (!element.empty()) codings.emplace_back(element);
    }
  }
  return codings;
}

bool IsChunked(absl::string_view coding) { return absl::EqualsIgnoreCase(coding, "chunked"); }

}  // namespace

absl::Status CheckRequestFraming(const bhttp::request_header<>& header) {
  if (header.find(bhttp::field::transfer_encoding) == header.end()) return absl::OkStatus();
  const std::vector<std::string> codings = Codings(header);
  const std::string sent = absl::StrCat("Transfer-Encoding \"", absl::StrJoin(codings, ", "), "\"");
  // Each of these leaves the body's length unknown or doubtful: 400, then close (§6.1, §6.3).
  if (header.version() < 11) {
    return absl::InvalidArgumentError(absl::StrCat(sent, " in an HTTP/1.0 request"));
  }
  if (header.find(bhttp::field::content_length) != header.end()) {
    return absl::InvalidArgumentError(absl::StrCat(sent, " together with Content-Length"));
  }
  if (codings.empty() || !IsChunked(codings.back())) {
    return absl::InvalidArgumentError(absl::StrCat(sent, ": the final coding must be chunked"));
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (IsChunked(codings[i])) {
      return absl::InvalidArgumentError(absl::StrCat(sent, ": chunked more than once"));
    }
  }
  // The length is known, but the body is encoded in a way the server does not decode.
  if (codings.size() > 1) {
    return absl::UnimplementedError(absl::StrCat(sent, ": transfer coding \"", codings.front(),
                                                 "\" is not implemented (only chunked is)"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda::server::http
