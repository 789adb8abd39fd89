#include "tools/common/gnuplot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace paddle_like {
namespace tools {

std::string FindGnuplot() {
  for (const char* path : {"/usr/bin/gnuplot", "/usr/local/bin/gnuplot", "/bin/gnuplot"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

bool RunGnuplot(const std::string& script, std::string* error) {
  std::string gnuplot = FindGnuplot();
  if (gnuplot.empty()) {
    *error = "gnuplot not found (Debian: apt-get install gnuplot-nox)";
    return false;
  }
  char tmpl[] = "/tmp/paddle_like_plot_XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) {
    *error = "cannot create a temporary script file";
    return false;
  }
  ::close(fd);
  std::string path = tmpl;
  {
    std::ofstream s(path);
    s << script;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(gnuplot.c_str(), "gnuplot", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  ::unlink(path.c_str());
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "gnuplot failed";
    return false;
  }
  return true;
}

std::string GnuplotString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace tools
}  // namespace paddle_like
