// Where a member of a JSON text is, as bytes of the text: the door parses bodies into
// key-sorted maps (nlohmann::json, whose lookups stay fast whatever a hostile body holds),
// so a subtree whose key order matters (a JSON Schema's properties: the order the output
// writes them in) is taken from the body's own text instead.
#pragma once

#include <optional>
#include <string_view>
#include <variant>
#include <vector>

namespace pagoda::server::http {

// A step of a path: an object member's name (compared with the raw key text, escapes
// included) or an array index.
using JsonStep = std::variant<std::string_view, size_t>;

// The text of the value at `path` in the JSON text `text` (the last member of a repeated
// name, as the parser keeps it); std::nullopt when there is none or `text` is malformed on
// the way. A lookup, not a validator: callers compare what they parse of the span with the
// parsed body before trusting it.
std::optional<std::string_view> FindJsonValue(std::string_view text,
                                              const std::vector<JsonStep>& path);

}  // namespace pagoda::server::http
