// Where a chat template comes from: the model file's metadata or an override file.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "model/gguf.h"

namespace pagoda::chat {

// `tokenizer.chat_template` of a GGUF file; NotFound when the model has none,
// InvalidArgument when the key is not a string.
absl::StatusOr<std::string> ChatTemplateFromGguf(const gguf::GgufFile& file);

// The whole text of a template file (for --chat-template FILE); NotFound when missing,
// InvalidArgument when empty or unreadable.
absl::StatusOr<std::string> ChatTemplateFromFile(const std::string& path);

}  // namespace pagoda::chat
