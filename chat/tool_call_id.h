// Tool call ids ("call_" and 24 random letters and digits, as OpenAI's look), from a source
// a test can replace with a deterministic one.
#pragma once

#include <functional>
#include <string>

namespace pagoda::chat {

// Returns the next id each time it is called.
using ToolCallIdSource = std::function<std::string()>;

// "call_" + 24 alphanumerics from a generator seeded from std::random_device (ids only need
// to be distinct within a conversation, not secret).
ToolCallIdSource RandomToolCallIds();

// "call_" + the call's number, zero-padded to 24 digits: "call_000…0", "call_000…1", ...
ToolCallIdSource SequentialToolCallIds();

}  // namespace pagoda::chat
