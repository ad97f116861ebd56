// pagoda: a paged-attention LLM serving daemon. `pagoda <command> [flags]`; every flag
// belongs to one command, and `pagoda <command> --help` lists that command's flags.
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tools/commands.h"

namespace {

// Reports arguments no command claimed (a flag of another command, a stray value) and
// returns 2, or returns 0 when there were none.
int ReportUnclaimed(const std::string& where, const std::vector<std::string>& args) {
  if (args.empty()) return 0;
  std::cerr << where << ": ";
  if (args[0].size() > 1 && args[0][0] == '-') {
    std::cerr << "unknown flag " << args[0].substr(0, args[0].find('='));
  } else {
    std::cerr << "unexpected argument '" << args[0] << "'";
  }
  if (where == "pagoda") {
    std::cerr << "; flags go after the command (`pagoda <command> --help` lists them)\n";
  } else {
    std::cerr << "; `" << where << " --help` lists its flags\n";
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("pagoda: a paged-attention LLM serving daemon.", "pagoda");
  // Defaults shown in --help; a repeated flag takes its last value. Subcommands inherit these.
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(0, 1);
  // Unclaimed arguments are reported below, naming the command they were given to.
  app.allow_extras();
  std::vector<pagoda::tools::Command> commands = {pagoda::tools::AddServeCommand(app),
                                                  pagoda::tools::AddGenerateCommand(app),
                                                  pagoda::tools::AddMakeModelCommand(app)};
  for (pagoda::tools::Command& c : commands) c.app->allow_extras();
  app.footer("`pagoda <command> --help` lists a command's flags.");
  if (argc == 2 && std::string(argv[1]) == "help") {
    std::cout << app.help();
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!app.remaining().empty() && app.remaining()[0][0] != '-') {
    std::cerr << "pagoda: unknown command '" << app.remaining()[0] << "'\n\n" << app.help();
    return 2;
  }
  if (int rc = ReportUnclaimed("pagoda", app.remaining()); rc != 0) return rc;
  for (pagoda::tools::Command& c : commands) {
    if (!c.app->parsed()) continue;
    if (int rc = ReportUnclaimed("pagoda " + c.app->get_name(), c.app->remaining()); rc != 0) {
      return rc;
    }
    return c.run();
  }
  std::cerr << app.help();
  return 2;
}
