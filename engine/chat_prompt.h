// A model's chat template, ready to turn a chat request's messages into its prompt text,
// and that text into token ids: special-token text the template writes becomes special
// tokens; in message content it stays text unless the request opts in.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/tool_call_format.h"
#include "engine/request.h"
#include "model/tokenizer.h"
#include "nlohmann/json_fwd.hpp"

namespace pagoda::gguf {
class GgufFile;
}
namespace pagoda::chat {
class ChatTemplate;
}

namespace pagoda::engine {

// A rendered chat prompt: its text and the byte ranges of it that came from the messages
// (content; never a role), sorted and disjoint.
struct ChatPromptText {
  std::string text;
  std::vector<model::TextRange> content;
};

// The token ids of `prompt` (rendered from `messages`), BOS first when `tok` adds one.
// Special-token text written by the template becomes its token; inside content it does only
// with `content_special` (else it is plain text, so a message cannot forge the template's
// markup). Without content_special, InvalidArgument when a role spells a special token
// (roles become markup: '<|im_start|>' + role).
absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const model::Tokenizer& tok,
                                                      const std::vector<ChatMessage>& messages,
                                                      const ChatPromptText& prompt,
                                                      bool content_special);

class ChatPrompt {
 public:
  // The template `override_source` (--chat-template; non-empty) or else the file's
  // `tokenizer.chat_template`. An override that does not parse, cannot render a one-user
  // conversation, or exceeds a render budget (chat/budget.h) on an 18-message one (tools
  // too when it reads them) is InvalidArgument (a load error); a model template with any of
  // these problems, or none at all, is remembered and returned by every Render.
  // `bos_text`/`eos_text` are the vocabulary's BOS/EOS pieces; with `strip_bos` a rendered leading
  // BOS is dropped (tokenization adds it).
  static absl::StatusOr<std::unique_ptr<ChatPrompt>> Create(const gguf::GgufFile& file,
                                                            const std::string& override_source,
                                                            std::string bos_text,
                                                            std::string eos_text, bool strip_bos);
  ~ChatPrompt();

  // The prompt text for `messages`; FailedPrecondition when the model has no usable
  // template (naming why), InvalidArgument for messages the template refuses
  // (raise_exception) or an empty list, Unimplemented for a construct outside the subset.
  // `tools` (may be null: none) is the template's `tools` variable; `kwargs` (may be null)
  // more variables (a JSON object, checked by the caller: RenderChecked).
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json* tools = nullptr,
                                     const nlohmann::json* kwargs = nullptr) const;
  // As Render, with the content ranges of the text (for EncodeChatPrompt).
  absl::StatusOr<ChatPromptText> RenderWithSpans(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt,
                                                 const nlohmann::ordered_json* tools = nullptr,
                                                 const nlohmann::json* kwargs = nullptr) const;
  // The template's source; "" when there is no usable template.
  std::string_view source() const;
  // False when the template never reads `tools` (chat::TemplateReadsTools): then a
  // request's tools are offered in a system message (chat::ToolsSystemPrompt) written for
  // the format set here, merged into the conversation's own system message when it has one.
  bool reads_tools() const { return reads_tools_; }
  void set_tool_call_format(chat::ToolCallFormat format) { tool_call_format_ = format; }

 private:
  ChatPrompt() = default;
  std::unique_ptr<chat::ChatTemplate> template_;
  absl::Status unusable_;  // why there is no template (template_ null)
  std::string bos_text_;
  std::string eos_text_;
  bool strip_bos_ = false;
  bool reads_tools_ = false;
  chat::ToolCallFormat tool_call_format_ = chat::ToolCallFormat::kNone;
};

}  // namespace pagoda::engine
