#include "chat/template_source.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagoda::chat {

absl::StatusOr<std::string> ChatTemplateFromGguf(const gguf::GgufFile& file) {
  if (file.Find("tokenizer.chat_template") == nullptr) {
    return absl::NotFoundError("the model has no tokenizer.chat_template");
  }
  return file.GetString("tokenizer.chat_template");
}

absl::StatusOr<std::string> ChatTemplateFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open chat template file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template file ", path, " is empty"));
  }
  return text.str();
}

}  // namespace pagoda::chat
