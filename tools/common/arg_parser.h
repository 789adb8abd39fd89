// The argv walk the command-line tools (launch, comm_bench) share: "--flag value" and
// "--flag=value", a flag's value from after the '=' or from the next argument, and one way
// to refuse a bad command line. Each tool keeps its own flag table and value checks.
#pragma once

#include <string>
#include <vector>

namespace paddle_like {
namespace tools {

// Prints "<prog>: <why>", a blank line and the usage to stderr, then exits with status 2
// (a usage error, as opposed to the tool's own failures).
[[noreturn]] void UsageError(const char* prog, const char* usage, const std::string& why);

class ArgParser {
 public:
  // prog and usage are used for messages only and must outlive the parser.
  ArgParser(int argc, char** argv, const char* prog, const char* usage);

  // Steps to the next argument (the first call: argv[1]); false past the last one.
  bool Next();

  // The current argument as given, e.g. "--iters=5".
  const std::string& arg() const { return arg_; }
  // Its flag: "--iters" for "--iters=5". Only "--" options split at '='; anything else is
  // the whole argument.
  const std::string& flag() const { return flag_; }

  // The flag's value: the part after '=', else the next argument, which is consumed.
  // Refuses the command line with "<flag> needs a value" when there is neither.
  std::string Value();

  // The arguments after the current one (with include_current: from the current one on),
  // for a tool whose own options end at "--" or at the first non-option.
  std::vector<std::string> Rest(bool include_current) const;

  // -h / --help: prints the usage to stdout and exits 0.
  [[noreturn]] void Help() const;

 private:
  int argc_;
  char** argv_;
  const char* prog_;
  const char* usage_;
  int i_ = 0;  // index of the current argument; 0 before the first Next()
  std::string arg_, flag_, value_;
  bool have_value_ = false;  // "--flag=value" gave the value inline
};

}  // namespace tools
}  // namespace paddle_like
