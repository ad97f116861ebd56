#include "chat/tool_definitions.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pagoda::chat {
namespace {

absl::Status Bad(size_t index, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tools[", index, "]", field, ": ", what));
}

// `j` with object keys in the order ToolsTemplateJson documents, at every depth. Linear in
// the members: they are appended to the ordered object's vector directly, since `j`'s keys
// are unique already (its operator[] would search the members on every insert: quadratic).
// Iterative: a schema may nest deeper than a stack allows.
nlohmann::ordered_json Canonical(const nlohmann::json& j) {
  static constexpr const char* kFirst[] = {"type",       "description", "enum",
                                           "properties", "items",       "required"};
  using Members = nlohmann::ordered_json::object_t::Container;
  nlohmann::ordered_json root;
  // Values still to copy, each with where its copy goes (filled in place: an element of
  // an array or object reserved before, so no reallocation moves it).
  std::vector<std::pair<const nlohmann::json*, nlohmann::ordered_json*>> todo = {{&j, &root}};
  while (!todo.empty()) {
    const auto [from, to] = todo.back();
    todo.pop_back();
    if (from->is_array()) {
      *to = nlohmann::ordered_json::array();
      auto& items = to->get_ref<nlohmann::ordered_json::array_t&>();
      items.resize(from->size());
      for (size_t i = 0; i < from->size(); ++i) todo.emplace_back(&(*from)[i], &items[i]);
    } else if (from->is_object()) {
      *to = nlohmann::ordered_json::object();
      Members& members = to->get_ref<nlohmann::ordered_json::object_t&>();
      members.reserve(from->size());
      std::vector<const nlohmann::json*> sources;
      for (const char* key : kFirst) {
        if (const auto it = from->find(key); it != from->end()) {
          members.emplace_back(key, nullptr);
          sources.push_back(&*it);
        }
      }
      for (auto it = from->begin(); it != from->end(); ++it) {
        const std::string& key = it.key();
        if (std::find_if(std::begin(kFirst), std::end(kFirst),
                         [&](const char* first) { return key == first; }) != std::end(kFirst)) {
          continue;
        }
        members.emplace_back(key, nullptr);
        sources.push_back(&it.value());
      }
      for (size_t i = 0; i < members.size(); ++i) todo.emplace_back(sources[i], &members[i].second);
    } else {
      *to = nlohmann::ordered_json(*from);
    }
  }
  return root;
}

}  // namespace

nlohmann::ordered_json ToolsTemplateJson(const std::vector<ToolDefinition>& tools) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ToolDefinition& tool : tools) {
    nlohmann::ordered_json fn = {{"name", tool.name}};
    if (!tool.description.empty()) fn["description"] = tool.description;
    if (!tool.parameters.empty()) fn["parameters"] = Canonical(tool.parameters);
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

absl::StatusOr<std::vector<ToolDefinition>> ParseToolDefinitions(const nlohmann::json& tools) {
  if (!tools.is_array()) return absl::InvalidArgumentError("tools: must be an array");
  std::vector<ToolDefinition> out;
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& tool = tools[i];
    if (!tool.is_object()) return Bad(i, "", "must be an object");
    const auto type = tool.find("type");
    if (type == tool.end() || *type != "function") {
      return Bad(i, ".type", "must be \"function\"");
    }
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) return Bad(i, ".function", "must be an object");
    ToolDefinition def;
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return Bad(i, ".function.name", "must be a non-empty string");
    }
    def.name = name->get<std::string>();
    if (!names.insert(def.name).second) {
      return Bad(i, ".function.name", absl::StrCat("'", def.name, "' is given twice"));
    }
    if (const auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
      if (!d->is_string()) return Bad(i, ".function.description", "must be a string");
      def.description = d->get<std::string>();
    }
    if (const auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) return Bad(i, ".function.parameters", "must be a JSON schema object");
      def.parameters = *p;
    }
    out.push_back(std::move(def));
  }
  return out;
}

}  // namespace pagoda::chat
