// The subcommands of the `pagoda` binary. Each takes the arguments after its name (argv[0]
// is "pagoda <command>") and returns the process exit code.
#pragma once

namespace pagoda::tools {

int RunGenerate(int argc, char** argv);
int RunMakeModel(int argc, char** argv);
int RunServe(int argc, char** argv);

}  // namespace pagoda::tools
