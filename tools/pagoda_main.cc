// pagoda: a paged-attention LLM serving daemon. `pagoda <command> [flags]`.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "common/flag_spelling.h"
#include "tools/commands.h"

namespace {

void PrintUsage() {
  std::cerr << "usage: pagoda <command> [flags]\n\n"
               "commands:\n"
               "  serve        run the gRPC daemon\n"
               "  generate     generate completions offline, or from a daemon (--server)\n"
               "  make-model   write a random-weight Llama GGUF from a preset\n\n"
               "`pagoda <command> --help` lists a command's flags. Flags may be spelled with\n"
               "dashes or underscores (--max-tokens or --max_tokens).\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  std::vector<std::string> args = {"pagoda " + command};
  for (int i = 2; i < argc; ++i) args.push_back(pagoda::NormalizeFlagSpelling(argv[i]));
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const int n = static_cast<int>(args.size());
  if (command == "generate") return pagoda::tools::RunGenerate(n, cargs.data());
  if (command == "make-model") return pagoda::tools::RunMakeModel(n, cargs.data());
  if (command == "serve") return pagoda::tools::RunServe(n, cargs.data());
  std::cerr << "pagoda: unknown command '" << command << "'\n\n";
  PrintUsage();
  return 2;
}
