// Where templates come from: GGUF metadata and --chat-template files.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "chat/template_source.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda::chat {
namespace {

TEST(ChatTemplateSource, ReadsTokenizerChatTemplateFromGguf) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddString("tokenizer.chat_template", "{{ messages[0].content }}");
  auto file = gguf::GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::string> text = ChatTemplateFromGguf(**file);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{{ messages[0].content }}");
}

TEST(ChatTemplateSource, ModelWithoutTemplateIsNotFound) {
  auto file = gguf::GgufFile::Open(testing::ModelPath("stories260K.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ChatTemplateFromGguf(**file).status().code(), absl::StatusCode::kNotFound);
}

TEST(ChatTemplateSource, NonStringTemplateIsInvalid) {
  gguf::GgufWriter writer;
  writer.AddUint32("tokenizer.chat_template", 7);
  auto file = gguf::GgufFile::FromBytes(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ChatTemplateFromGguf(**file).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateSource, ReadsOverrideFile) {
  std::string dir = testing::MakeTempDir();
  std::ofstream(dir + "/t.jinja") << "{{ bos_token }}\n";
  absl::StatusOr<std::string> text = ChatTemplateFromFile(dir + "/t.jinja");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{{ bos_token }}\n");
  EXPECT_EQ(ChatTemplateFromFile(dir + "/missing.jinja").status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(dir + "/empty.jinja");
  EXPECT_EQ(ChatTemplateFromFile(dir + "/empty.jinja").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda::chat
