#include "tools/common/fr_analysis.h"

#include <dirent.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace paddle_like {
namespace tools {

namespace {

struct Op {
  int64_t seq = 0;      // the collective number (a P2P op: the last collective before it)
  int64_t p2p_seq = 0;  // 0 for a collective; absent in dumps from before P2P numbering
  std::map<std::string, std::string> fields;  // op, dtype, in, out, peer, red, tag, state, ...
  // What must agree across ranks: the `sig` the runtime wrote (OpSignature, which leaves out
  // what legitimately differs per rank: a root's lists, all-to-all splits); dumps from before
  // it have their fields compared.
  std::string Signature() const {
    if (auto sig = fields.find("sig"); sig != fields.end()) return sig->second;
    std::string s;
    for (const char* k : {"op", "dtype", "in", "out", "peer", "red"}) {
      auto it = fields.find(k);
      s += std::string(k) + "=" + (it == fields.end() ? "?" : it->second) + " ";
    }
    return s;
  }
  std::string Describe() const {
    auto f = [&](const char* k) {
      auto it = fields.find(k);
      return it == fields.end() ? std::string("?") : it->second;
    };
    std::string s = f("op") + " " + f("dtype") + " in=" + f("in") + " out=" + f("out");
    if (f("peer") != "-1") s += " root/peer=" + f("peer");
    if (f("red") != "-1") s += " red=" + f("red");
    if (!f("name").empty() && f("name") != "?") s += " '" + f("name") + "'";
    return s + " (" + f("state") + ")";
  }
};

struct RankDump {
  int size = 0;
  // The collectives by seq: every rank issues them in the same order, so they are compared
  // across ranks. Point-to-point ops involve their two ends only and are not.
  std::map<int64_t, Op> ops;
};

Op ParseLine(const std::string& line, const std::string& where) {
  Op op;
  // "name=" is last and may hold spaces.
  size_t name_at = line.find(" name=");
  std::istringstream in(line.substr(0, name_at));
  std::string token;
  while (in >> token) {
    size_t eq = token.find('=');
    if (eq == std::string::npos) throw std::runtime_error(where + ": no '=' in '" + token + "'");
    op.fields[token.substr(0, eq)] = token.substr(eq + 1);
  }
  op.fields["name"] = name_at == std::string::npos ? "" : line.substr(name_at + 6);
  auto seq = op.fields.find("seq");
  if (seq == op.fields.end()) throw std::runtime_error(where + ": no seq");
  op.seq = std::stoll(seq->second);
  auto p2p = op.fields.find("p2p_seq");
  if (p2p != op.fields.end()) op.p2p_seq = std::stoll(p2p->second);
  return op;
}

std::string List(const std::set<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  bool first = true;
  for (int r : ranks) {
    s += (first ? "" : ", ") + std::to_string(r);
    first = false;
  }
  return s;
}

std::string AnalyzeGroup(int gid, const std::map<int, RankDump>& ranks) {
  std::ostringstream out;
  int size = ranks.begin()->second.size;
  std::set<int> have, absent;
  for (auto& [r, d] : ranks) have.insert(r);
  for (int r = 0; r < size; ++r) {
    if (!have.count(r)) absent.insert(r);
  }
  out << "group " << gid << ": dumps from " << List(have) << " of " << size;
  if (!absent.empty()) out << "; none from " << List(absent) << " (dead, hung, or not dumping)";
  out << "\n";
  // The seqs every dump still holds the start of (rings keep the last N ops).
  int64_t from = 0, to = 0;
  for (auto& [r, d] : ranks) {
    if (d.ops.empty()) continue;
    from = std::max(from, d.ops.begin()->first);
    to = std::max(to, d.ops.rbegin()->first);
  }
  for (int64_t seq = from; seq <= to; ++seq) {
    std::map<std::string, std::set<int>> by_signature;
    std::map<std::string, const Op*> example;
    std::set<int> missing;
    for (auto& [r, d] : ranks) {
      auto it = d.ops.find(seq);
      if (it == d.ops.end()) {
        missing.insert(r);
        continue;
      }
      by_signature[it->second.Signature()].insert(r);
      example[it->second.Signature()] = &it->second;
    }
    if (missing.empty() && by_signature.size() <= 1) continue;
    out << "  first divergence at seq " << seq << ":\n";
    for (auto& [sig, rs] : by_signature) {
      out << "    " << List(rs) << (rs.size() == 1 ? " issued " : " issued ")
          << example[sig]->Describe() << "\n";
    }
    for (int r : missing) {
      const auto& ops = ranks.at(r).ops;
      out << "    rank " << r << " never issued seq " << seq;
      if (!ops.empty()) {
        out << " (its last op is seq " << ops.rbegin()->first << ": "
            << ops.rbegin()->second.Describe() << ")";
      }
      out << "\n";
    }
    if (by_signature.size() > 1) out << "    => the ranks called different ops at this point\n";
    else out << "    => " << List(missing) << " did not call this op (skipped it, or stuck before)\n";
    return out.str();
  }
  out << "  no divergence in seqs " << from << ".." << to << ": every rank issued the same ops";
  std::set<int> pending;
  for (auto& [r, d] : ranks) {
    for (auto& [seq, op] : d.ops) {
      auto st = op.fields.find("state");
      if (st != op.fields.end() && (st->second == "issued" || st->second == "started")) {
        pending.insert(r);
      }
    }
  }
  if (!pending.empty()) out << "; still pending on " << List(pending);
  out << "\n";
  return out.str();
}

}  // namespace

std::string AnalyzeFlightRecorderDumps(const std::string& dir) {
  std::map<int, std::map<int, RankDump>> groups;  // gid -> rank -> dump
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw std::runtime_error("cannot open " + dir);
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("fr_g", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".txt") {
      files.push_back(name);
    }
  }
  ::closedir(d);
  if (files.empty()) throw std::runtime_error("no flight-recorder dump (fr_g*_r*.txt) in " + dir);
  for (const auto& name : files) {
    int gid = -1, rank = -1;
    if (std::sscanf(name.c_str(), "fr_g%d_r%d.txt", &gid, &rank) != 2) continue;
    RankDump dump;
    std::ifstream f(dir + "/" + name);
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.empty()) continue;
      if (line[0] == '#') {
        size_t at = line.rfind("size=");
        if (at != std::string::npos) dump.size = std::stoi(line.substr(at + 5));
        continue;
      }
      Op op = ParseLine(line, dir + "/" + name + ":" + std::to_string(n));
      if (op.p2p_seq == 0) dump.ops[op.seq] = std::move(op);
    }
    if (dump.size <= 0) throw std::runtime_error(dir + "/" + name + ": no '# ... size=N' header");
    groups[gid][rank] = std::move(dump);
  }
  std::string out;
  for (auto& [gid, ranks] : groups) out += AnalyzeGroup(gid, ranks);
  return out;
}

}  // namespace tools
}  // namespace paddle_like
