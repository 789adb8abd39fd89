#include "tests/tools/tools_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace paddle_like {
namespace testing {

int ProcResult::exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

Proc::Proc(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  start_ = std::chrono::steady_clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    for (const auto& kv : env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::execv(args[0], args.data());
    std::perror("execv");
    ::_exit(127);
  }
  ::close(p[1]);
  fd_ = p[0];
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

Proc::~Proc() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) ::close(fd_);
}

const std::string& Proc::Poll() {
  char buf[4096];
  ssize_t r;
  while (fd_ >= 0 && (r = ::read(fd_, buf, sizeof(buf))) > 0) out_.append(buf, r);
  return out_;
}

ProcResult Proc::Finish(std::chrono::milliseconds timeout) {
  ProcResult res;
  auto deadline = start_ + timeout;
  bool eof = false;
  while (!eof) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      res.timed_out = true;
      ::kill(pid_, SIGKILL);
      break;
    }
    pollfd pfd{fd_, POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 100)));
    char buf[4096];
    ssize_t r = ::read(fd_, buf, sizeof(buf));
    if (r > 0) out_.append(buf, r);
    if (r == 0) eof = true;
  }
  ::waitpid(pid_, &res.status, 0);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  pid_ = -1;
  Poll();
  res.output = out_;
  return res;
}

ProcResult RunProc(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                   const std::map<std::string, std::string>& env) {
  Proc p(argv, env);
  return p.Finish(timeout);
}

bool PidAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/tools_test_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::string cmd = "rm -rf '" + path_ + "'";
  int ignored = std::system(cmd.c_str());
  (void)ignored;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ------------------------------------------------------------------ JSON
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  Json Document() {
    Json v = Value();
    Ws();
    if (i_ != s_.size()) Fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) {
    throw std::runtime_error("invalid JSON at offset " + std::to_string(i_) + ": " + why);
  }
  void Ws() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_])) ++i_;
  }
  bool Eat(char c) {
    Ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Eat(c)) Fail(std::string("expected '") + c + "'");
  }
  std::string String() {
    Expect('"');
    std::string o;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) Fail("bad escape");
        char e = s_[i_++];
        switch (e) {
          case 'n': o += '\n'; break;
          case 't': o += '\t'; break;
          case 'r': o += '\r'; break;
          case 'b': o += '\b'; break;
          case 'f': o += '\f'; break;
          case 'u':
            if (i_ + 4 > s_.size()) Fail("bad \\u escape");
            o += static_cast<char>(std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16));
            i_ += 4;
            break;
          default: o += e;
        }
      } else {
        o += c;
      }
    }
    if (i_ >= s_.size()) Fail("unterminated string");
    ++i_;
    return o;
  }
  Json Value() {
    Ws();
    if (i_ >= s_.size()) Fail("unexpected end");
    Json v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::kObject;
      if (Eat('}')) return v;
      do {
        Ws();
        std::string k = String();
        Expect(':');
        v.obj[k] = Value();
      } while (Eat(','));
      Expect('}');
    } else if (c == '[') {
      ++i_;
      v.kind = Json::kArray;
      if (Eat(']')) return v;
      do {
        v.arr.push_back(Value());
      } while (Eat(','));
      Expect(']');
    } else if (c == '"') {
      v.kind = Json::kString;
      v.str = String();
    } else if (s_.compare(i_, 4, "true") == 0) {
      v.kind = Json::kBool;
      v.b = true;
      i_ += 4;
    } else if (s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::kBool;
      i_ += 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      v.num = std::strtod(start, &end);
      if (end == start) Fail("unexpected character");
      v.kind = Json::kNumber;
      i_ += static_cast<size_t>(end - start);
    }
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

const Json& Json::operator[](const std::string& key) const {
  static const Json null;
  auto it = obj.find(key);
  return it == obj.end() ? null : it->second;
}

Json ParseJson(const std::string& text) { return Parser(text).Document(); }

}  // namespace testing
}  // namespace paddle_like
