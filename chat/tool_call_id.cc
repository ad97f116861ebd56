#include "chat/tool_call_id.h"

#include <memory>
#include <random>

#include "absl/strings/str_format.h"

namespace pagoda::chat {

constexpr int kIdChars = 24;

ToolCallIdSource RandomToolCallIds() {
  auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [engine] {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
    std::string id = "call_";
    for (int i = 0; i < kIdChars; ++i) id.push_back(kAlphabet[pick(*engine)]);
    return id;
  };
}

ToolCallIdSource SequentialToolCallIds() {
  auto next = std::make_shared<uint64_t>(0);
  return [next] { return absl::StrFormat("call_%024d", (*next)++); };
}

}  // namespace pagoda::chat
