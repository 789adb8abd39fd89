#include "tools/common/arg_parser.h"

#include <cstdio>
#include <cstdlib>

namespace paddle_like {
namespace tools {

void UsageError(const char* prog, const char* usage, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n\n%s", prog, why.c_str(), usage);
  std::exit(2);
}

ArgParser::ArgParser(int argc, char** argv, const char* prog, const char* usage)
    : argc_(argc), argv_(argv), prog_(prog), usage_(usage) {}

bool ArgParser::Next() {
  if (++i_ >= argc_) return false;
  arg_ = argv_[i_];
  flag_ = arg_;
  value_.clear();
  have_value_ = false;
  if (arg_.rfind("--", 0) == 0) {
    if (auto eq = arg_.find('='); eq != std::string::npos) {
      flag_ = arg_.substr(0, eq);
      value_ = arg_.substr(eq + 1);
      have_value_ = true;
    }
  }
  return true;
}

std::string ArgParser::Value() {
  if (have_value_) return value_;
  if (i_ + 1 >= argc_) UsageError(prog_, usage_, flag_ + " needs a value");
  return argv_[++i_];
}

std::vector<std::string> ArgParser::Rest(bool include_current) const {
  std::vector<std::string> rest;
  for (int j = include_current ? i_ : i_ + 1; j < argc_; ++j) rest.push_back(argv_[j]);
  return rest;
}

void ArgParser::Help() const {
  std::fputs(usage_, stdout);
  std::exit(0);
}

}  // namespace tools
}  // namespace paddle_like
