// Runs gnuplot (Debian's gnuplot-nox) on a script, for the tools' PNG plots.
#pragma once

#include <string>

namespace paddle_like {
namespace tools {

// The gnuplot executable, or "" when none is installed.
std::string FindGnuplot();

// Writes `script` to a temporary file and runs gnuplot on it. Returns false (and says why in
// *error) when gnuplot is missing or fails.
bool RunGnuplot(const std::string& script, std::string* error);

// A gnuplot string literal (double-quoted, escaped).
std::string GnuplotString(const std::string& s);

}  // namespace tools
}  // namespace paddle_like
