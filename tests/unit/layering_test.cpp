// The layering rule (docs/architecture.md, "Layers"): every folder under src/
// has one job and a fixed list of the src/ folders and the libraries it may
// include; dependencies point one way. This test reads every #include of every
// source file under src/ and fails on any include the table does not allow,
// naming file:line and the include.
//
// The checker is a pure function, include_violations(path, text), tested on
// inline samples before it is run on the tree. A new folder under src/ is a
// failure until it is added to kLayers below, with its allowed includes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

// --- The table ---------------------------------------------------------------

// Header families outside the standard library, by the first component of
// the name in angle brackets.
enum class Lib {
  Posix,      // C and POSIX system headers: <unistd.h>, <sys/stat.h>, <arpa/inet.h>
  Nlohmann,   // <nlohmann/...>
  YamlCpp,    // <yaml-cpp/...>
  OpenSsl,    // <openssl/...>
  Boost,      // <boost/...> (Asio, Beast)
  CppRest,    // <cpprest/...>, <pplx/...> (cpprestsdk)
  Cli11,      // <CLI/...>
  Simd,       // <emmintrin.h> (SSE2 intrinsics, the projected parser's string scan)
};

struct Layer {
  std::string_view folder;                      // under src/; "main.cpp" for src/main.cpp
  std::vector<std::string_view> may_include;    // other src/ folders (its own is always allowed)
  std::vector<Lib> libraries;                   // non-standard headers it may include
  bool threads = true;                          // <thread>, <mutex>, <future>, ...
  bool io = true;                               // <iostream>, <fstream>, <cstdio>, <filesystem>, ...
};

// The one-way dependency table. Keep it in step with docs/architecture.md,
// "Layers". base is vocabulary (Result<T>, the Prometheus text writer, the
// quoting rule): every layer may use it; it uses nothing.
const std::vector<Layer>& layers() {
  static const std::vector<Layer> kLayers = {
      {"base", {}, {}, /*threads=*/false},
      {"policy", {}, {}, /*threads=*/false, /*io=*/false},
      {"model", {"policy", "base"}, {Lib::Nlohmann, Lib::YamlCpp, Lib::Simd}, /*threads=*/false},
      {"admission", {"model", "policy", "base"}, {Lib::Nlohmann}, /*threads=*/false},
      {"config", {"policy", "base"}, {Lib::Posix}},
      {"tls", {"config", "base"}, {Lib::Posix, Lib::OpenSsl, Lib::Boost}},
      {"server", {"tls", "config", "base"}, {Lib::Posix, Lib::Boost}},
      {"kube", {"config", "tls", "base"},
       {Lib::Posix, Lib::Nlohmann, Lib::YamlCpp, Lib::OpenSsl, Lib::Boost, Lib::CppRest}},
      // The engine: work queue, controller, manager (the operator's threads).
      {"runtime", {"kube", "config", "base"}, {}},
      {"controller", {"runtime", "kube", "admission", "model", "policy", "tls", "config", "base"},
       {Lib::Posix, Lib::Nlohmann}},
      {"cli",
       {"controller", "runtime", "kube", "server", "admission", "model", "policy", "tls", "config", "base"},
       {Lib::Posix, Lib::Nlohmann, Lib::Boost, Lib::Cli11}},
      {"main.cpp", {"cli"}, {}},
  };
  return kLayers;
}

const Layer* find_layer(std::string_view folder) {
  for (const auto& l : layers())
    if (l.folder == folder) return &l;
  return nullptr;
}

// The files of a layer without threads that may still name the thread
// headers: the clock's interface is a wait (a mutex and a condition variable
// passed in); it starts no thread.
constexpr std::string_view kWaitsWithoutThreads[] = {"base/clock.h", "base/clock.cpp"};

bool contains(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The C++20 standard library headers (and the C library's <cxxx> forms).
bool is_std_header(std::string_view name) {
  static constexpr std::string_view kStd[] = {
      "algorithm", "any", "array", "atomic", "barrier", "bit", "bitset", "cassert", "cctype",
      "cerrno", "cfenv", "cfloat", "charconv", "chrono", "cinttypes", "climits", "clocale",
      "cmath", "codecvt", "compare", "complex", "concepts", "condition_variable", "coroutine",
      "csetjmp", "csignal", "cstdarg", "cstddef", "cstdint", "cstdio", "cstdlib", "cstring",
      "ctime", "cuchar", "cwchar", "cwctype", "deque", "exception", "execution", "expected",
      "filesystem", "format", "forward_list", "fstream", "functional", "future",
      "initializer_list", "iomanip", "ios", "iosfwd", "iostream", "istream", "iterator",
      "latch", "limits", "list", "locale", "map", "memory", "memory_resource", "mutex", "new",
      "numbers", "numeric", "optional", "ostream", "queue", "random", "ranges", "ratio",
      "regex", "scoped_allocator", "semaphore", "set", "shared_mutex", "source_location",
      "span", "sstream", "stack", "stdexcept", "stop_token", "streambuf", "string",
      "string_view", "syncstream", "system_error", "thread", "tuple", "type_traits",
      "typeindex", "typeinfo", "unordered_map", "unordered_set", "utility", "valarray",
      "variant", "vector", "version"};
  return std::find(std::begin(kStd), std::end(kStd), name) != std::end(kStd);
}

bool is_thread_header(std::string_view name) {
  static constexpr std::string_view kThreads[] = {
      "thread", "mutex", "shared_mutex", "condition_variable", "future", "semaphore",
      "latch", "barrier", "stop_token"};
  return std::find(std::begin(kThreads), std::end(kThreads), name) != std::end(kThreads);
}

bool is_io_header(std::string_view name) {
  static constexpr std::string_view kIo[] = {
      "iostream", "istream", "ostream", "fstream", "sstream", "syncstream", "streambuf",
      "iomanip", "cstdio", "filesystem", "print"};
  return std::find(std::begin(kIo), std::end(kIo), name) != std::end(kIo);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The C library's and POSIX's own headers, as system headers.
bool is_posix_header(std::string_view name) {
  for (std::string_view dir : {"sys/", "arpa/", "netinet/", "net/"})
    if (starts_with(name, dir)) return name.find('/', dir.size()) == std::string_view::npos;
  static constexpr std::string_view kPosix[] = {
      "assert.h", "ctype.h",  "dirent.h", "dlfcn.h",    "errno.h",  "fcntl.h",  "fnmatch.h",
      "glob.h",   "grp.h",    "inttypes.h", "limits.h", "malloc.h", "netdb.h",  "poll.h",   "pthread.h",
      "pwd.h",    "sched.h",  "signal.h", "spawn.h",    "stdint.h", "stdio.h",  "stdlib.h",
      "string.h", "strings.h", "syslog.h", "termios.h", "time.h",   "unistd.h"};
  return std::find(std::begin(kPosix), std::end(kPosix), name) != std::end(kPosix);
}

struct LibInfo {
  Lib lib;
  std::string_view what;                      // for messages
  std::vector<std::string_view> prefixes;
  std::string_view who;                       // who may, for messages
};

const std::vector<LibInfo>& libraries() {
  static const std::vector<LibInfo> kLibs = {
      {Lib::Nlohmann, "nlohmann/json", {"nlohmann/"}, "model, admission, kube, controller, cli"},
      {Lib::YamlCpp, "yaml-cpp", {"yaml-cpp/"}, "model, kube"},
      {Lib::OpenSsl, "OpenSSL", {"openssl/"}, "tls, kube"},
      {Lib::Boost, "Boost (Asio/Beast)", {"boost/"}, "server, tls, kube, cli"},
      {Lib::CppRest, "cpprestsdk", {"cpprest/", "pplx/"}, "kube only"},
      {Lib::Cli11, "CLI11", {"CLI/"}, "cli only"},
      {Lib::Simd, "SSE2 intrinsics", {"emmintrin.h"}, "model only"},
  };
  return kLibs;
}

// --- Reading the source --------------------------------------------------------

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The text with every comment removed (a comment becomes one space; its
// newlines are kept, so line numbers do not move). String and character
// literals, raw strings included, are kept as they are, so a "//" inside a
// string is not a comment.
std::string strip_comments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const std::size_t n = text.size();
  auto at = [&](std::size_t i) { return i < n ? text[i] : '\0'; };
  std::size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (c == '/' && at(i + 1) == '/') {
      // To the end of the line; a backslash-newline continues the comment.
      i += 2;
      while (i < n && text[i] != '\n') {
        if (text[i] == '\\' && at(i + 1) == '\n') { out += '\n'; ++i; }
        ++i;
      }
      out += ' ';
      continue;
    }
    if (c == '/' && at(i + 1) == '*') {
      i += 2;
      while (i < n && !(text[i] == '*' && at(i + 1) == '/')) {
        if (text[i] == '\n') out += '\n';
        ++i;
      }
      i = std::min(n, i + 2);
      out += ' ';
      continue;
    }
    if (c == 'R' && at(i + 1) == '"') {
      // A raw string, unless R ends a longer identifier (u8R, LR, uR, UR are prefixes).
      std::size_t s = i;
      while (s > 0 && is_ident(text[s - 1])) --s;
      const std::string_view before = text.substr(s, i - s);
      if (before.empty() || before == "u8" || before == "L" || before == "u" || before == "U") {
        const std::size_t open = text.find('(', i + 2);
        if (open != std::string_view::npos) {
          const std::string close = ")" + std::string(text.substr(i + 2, open - i - 2)) + "\"";
          std::size_t end = text.find(close, open + 1);
          end = end == std::string_view::npos ? n : end + close.size();
          out.append(text.substr(i, end - i));
          i = end;
          continue;
        }
      }
    }
    if (c == '"' || c == '\'') {
      // A quote after a digit run is a digit separator (1'000), not a literal.
      if (c == '\'' && i > 0 && is_ident(text[i - 1])) {
        std::size_t s = i;
        while (s > 0 && (is_ident(text[s - 1]) || text[s - 1] == '\'' || text[s - 1] == '.')) --s;
        if (std::isdigit(static_cast<unsigned char>(text[s]))) { out += c; ++i; continue; }
      }
      const std::size_t start = i++;
      while (i < n && text[i] != c && text[i] != '\n') i += text[i] == '\\' ? 2 : 1;
      i = std::min(n, i + (i < n && text[i] == c ? 1 : 0));
      out.append(text.substr(start, i - start));
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

struct Violation {
  int line = 0;          // 0: about the file as a whole
  std::string include;   // as written, e.g. <cpprest/http_client.h> or "server/https_server.h"
  std::string why;
};

// The folder a file under src/ belongs to: its first path component, or
// "main.cpp" for src/main.cpp. "" for any other file directly in src/.
std::string folder_of(std::string_view rel_path) {
  const auto slash = rel_path.find('/');
  if (slash == std::string_view::npos) return rel_path == "main.cpp" ? "main.cpp" : "";
  return std::string(rel_path.substr(0, slash));
}

// Every include in `text` (a file at `rel_path` under src/, e.g.
// "admission/webhook.cpp") that the table does not allow.
std::vector<Violation> include_violations(std::string_view rel_path, std::string_view text) {
  std::vector<Violation> found;
  const std::string folder = folder_of(rel_path);
  const Layer* layer = find_layer(folder);
  if (layer == nullptr) {
    found.push_back({0, "",
                     "src/" + std::string(rel_path) + " is in " +
                         (folder.empty() ? std::string("src/ itself") : "an unknown folder src/" + folder + "/") +
                         ": add the folder to the layering table (tests/unit/layering_test.cpp and "
                         "docs/architecture.md, \"Layers\") with the folders it may include"});
    return found;
  }
  const bool strict_std_only = folder == "policy" || folder == "base";

  std::istringstream lines(strip_comments(text));
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line[p] != '#') continue;
    p = line.find_first_not_of(" \t", p + 1);
    if (p == std::string::npos || line.compare(p, 7, "include") != 0) continue;
    p += 7;
    if (line.compare(p - 7, 12, "include_next") == 0) p += 5;
    p = line.find_first_not_of(" \t", p);
    auto report = [&](std::string include, std::string why) {
      found.push_back({number, std::move(include), std::move(why)});
    };
    if (p == std::string::npos || (line[p] != '<' && line[p] != '"')) {
      std::string rest = p == std::string::npos ? "" : line.substr(p);
      report(rest, "an include the checker cannot read (a macro?): write the header's name");
      continue;
    }
    const char close = line[p] == '<' ? '>' : '"';
    const auto end = line.find(close, p + 1);
    if (end == std::string::npos) {
      report(line.substr(p), "an unterminated include");
      continue;
    }
    const std::string name = line.substr(p + 1, end - p - 1);
    const std::string written = line.substr(p, end - p + 1);

    if (close == '"') {
      // A project header: "folder/file.h".
      const auto slash = name.find('/');
      if (slash == std::string::npos || name.find("..") != std::string::npos || name.empty() ||
          name[0] == '/') {
        report(written, "project headers are included by their path under src/, \"folder/file.h\"");
        continue;
      }
      const std::string target = name.substr(0, slash);
      if (target == folder) continue;
      const Layer* to = find_layer(target);
      if (to == nullptr || target == "main.cpp") {
        report(written, "src/" + target + "/ is not a folder of the layering table" +
                            std::string(" (a third-party header belongs in <angle brackets>)"));
      } else if (!contains(layer->may_include, target)) {
        report(written, folder + " may not include " + target + "/ (the dependency direction is one way; " +
                            folder + " may include: " +
                            [&] {
                              std::string s;
                              for (auto f : layer->may_include) s += (s.empty() ? "" : ", ") + std::string(f);
                              return s.empty() ? std::string("nothing outside its own folder") : s;
                            }() +
                            ")");
      }
      continue;
    }

    // <...>: the standard library, a system header or a third-party library.
    if (name.find('/') == std::string::npos && name.find('.') == std::string::npos) {
      if (!is_std_header(name)) {
        report(written, "not a C++ standard library header the table knows");
      } else if (!layer->threads && is_thread_header(name) &&
                 std::find(std::begin(kWaitsWithoutThreads), std::end(kWaitsWithoutThreads), rel_path) ==
                     std::end(kWaitsWithoutThreads)) {
        report(written, folder + " has no threads of its own (docs/architecture.md, \"Layers\")");
      } else if (!layer->io && is_io_header(name)) {
        report(written, folder + " does no I/O (docs/architecture.md, \"The gate\")");
      }
      continue;
    }
    if (strict_std_only) {
      report(written, folder + " includes only the C++ standard library");
      continue;
    }
    if (is_posix_header(name)) {
      if (std::find(layer->libraries.begin(), layer->libraries.end(), Lib::Posix) == layer->libraries.end())
        report(written, folder + " may not include C or POSIX system headers (use the C++ library)");
      continue;
    }
    const LibInfo* info = nullptr;
    for (const auto& l : libraries())
      for (auto prefix : l.prefixes)
        if (starts_with(name, prefix)) info = &l;
    if (info == nullptr) {
      report(written, "a header of no library the table knows: add the library to the table with "
                      "the folders that may use it");
    } else if (std::find(layer->libraries.begin(), layer->libraries.end(), info->lib) ==
               layer->libraries.end()) {
      report(written, folder + " may not include " + std::string(info->what) + " (" +
                          std::string(info->who) + ")");
    }
  }
  return found;
}

std::string describe(const std::vector<Violation>& vs) {
  std::string s;
  for (const auto& v : vs) s += std::to_string(v.line) + ": " + v.include + ": " + v.why + "\n";
  return s;
}

// --- The checker on samples --------------------------------------------------------

bool passes(std::string_view path, std::string_view text) {
  return include_violations(path, text).empty();
}

TEST(Layering, TheTableNamesEveryFolderOfTheDesign) {
  for (std::string_view f : {"base", "policy", "model", "admission", "config", "tls", "server",
                             "kube", "runtime", "controller", "cli", "main.cpp"})
    EXPECT_NE(find_layer(f), nullptr) << f;
  // Every folder a layer may include is itself in the table, and no layer
  // lists itself or main.cpp.
  for (const auto& l : layers())
    for (auto f : l.may_include) {
      EXPECT_NE(find_layer(f), nullptr) << l.folder << " -> " << f;
      EXPECT_NE(f, l.folder);
      EXPECT_NE(f, "main.cpp");
    }
}

TEST(Layering, TheTableIsOneWay) {
  // No cycles: following may_include from any folder never comes back to it.
  for (const auto& start : layers()) {
    std::vector<std::string_view> stack(start.may_include.begin(), start.may_include.end());
    std::vector<std::string_view> seen;
    while (!stack.empty()) {
      auto f = stack.back();
      stack.pop_back();
      ASSERT_NE(f, start.folder) << "a cycle through " << start.folder;
      if (contains(seen, f)) continue;
      seen.push_back(f);
      for (auto g : find_layer(f)->may_include) stack.push_back(g);
    }
  }
}

TEST(Layering, CheckerRejectsAnIncludeAgainstTheDirection) {
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("policy/gate.cpp", "#include \"model/component.h\"\n"));
  EXPECT_FALSE(passes("policy/gate.h", "#include \"base/result.h\"\n"));
  EXPECT_FALSE(passes("base/result.h", "#include \"policy/gate.h\"\n"));
  EXPECT_FALSE(passes("model/pod.h", "#include \"admission/context.h\"\n"));
  EXPECT_FALSE(passes("tls/server_context.cpp", "#include \"policy/gate.h\"\n"));
  EXPECT_FALSE(passes("tls/certificates.cpp", "#include \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("server/https_server.cpp", "#include \"admission/webhook.h\"\n"));
  EXPECT_FALSE(passes("kube/client.cpp", "#include \"model/component.h\"\n"));
  EXPECT_FALSE(passes("kube/client.cpp", "#include \"controller/status.h\"\n"));
  EXPECT_FALSE(passes("controller/loops.cpp", "#include \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("controller/loops.cpp", "#include \"cli/commands.h\"\n"));
  EXPECT_FALSE(passes("config/log.cpp", "#include \"tls/certificates.h\"\n"));
  EXPECT_FALSE(passes("main.cpp", "#include \"admission/webhook.h\"\n"));
  EXPECT_FALSE(passes("cli/serve.cpp", "#include \"main.cpp/x.h\"\n"));
}

TEST(Layering, CheckerRejectsLibrariesOutsideTheirFolders) {
  EXPECT_FALSE(passes("server/https_server.cpp", "#include <CLI/CLI.hpp>\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include <cpprest/http_client.h>\n"));
  EXPECT_FALSE(passes("controller/loops.cpp", "#include <pplx/pplxtasks.h>\n"));
  EXPECT_FALSE(passes("cli/serve.cpp", "#include <cpprest/json.h>\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include <boost/beast/http.hpp>\n"));
  EXPECT_FALSE(passes("model/document.cpp", "#include <openssl/ssl.h>\n"));
  EXPECT_FALSE(passes("admission/review.cpp", "#include <yaml-cpp/yaml.h>\n"));
  EXPECT_FALSE(passes("config/log.cpp", "#include <nlohmann/json.hpp>\n"));
  EXPECT_FALSE(passes("server/https_server.cpp", "#include <nlohmann/json.hpp>\n"));
  EXPECT_FALSE(passes("admission/metrics.cpp", "#include <unistd.h>\n"));
  EXPECT_FALSE(passes("model/document.cpp", "#include <sys/stat.h>\n"));
  EXPECT_FALSE(passes("cli/serve.cpp", "#include <gtest/gtest.h>\n"));
  EXPECT_FALSE(passes("tls/certificates.cpp", "#include <absl/strings/str_cat.h>\n"));
  // policy and base: the standard library only.
  EXPECT_FALSE(passes("policy/gate.cpp", "#include <nlohmann/json.hpp>\n"));
  EXPECT_FALSE(passes("policy/gate.cpp", "#include <string.h>\n"));
  EXPECT_FALSE(passes("base/quote.cpp", "#include <boost/locale.hpp>\n"));
  EXPECT_FALSE(passes("base/prometheus.cpp", "#include <unistd.h>\n"));
  EXPECT_FALSE(passes("policy/gate.cpp", "#include <iostream>\n"));
  EXPECT_FALSE(passes("policy/gate.cpp", "#include <mutex>\n"));
  // No threads of their own in policy, base, model or admission.
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include <thread>\n"));
  EXPECT_FALSE(passes("model/pod.cpp", "#include <mutex>\n"));
  EXPECT_FALSE(passes("base/quote.cpp", "#include <condition_variable>\n"));
  EXPECT_TRUE(passes("base/clock.h", "#include <condition_variable>\n"));  // the named exception
  // The engine sits between controller and kube.
  EXPECT_TRUE(passes("controller/operator.cpp", "#include \"runtime/controller.h\"\n"));
  EXPECT_FALSE(passes("runtime/manager.cpp", "#include \"controller/operator.h\"\n"));
  EXPECT_FALSE(passes("runtime/manager.cpp", "#include \"admission/webhook.h\"\n"));
  EXPECT_FALSE(passes("runtime/manager.cpp", "#include \"cli/commands.h\"\n"));
  EXPECT_FALSE(passes("kube/api.cpp", "#include \"runtime/work_queue.h\"\n"));
  // Not a standard header.
  EXPECT_FALSE(passes("cli/serve.cpp", "#include <strng>\n"));
}

TEST(Layering, CheckerRejectsUnknownFoldersAndUnreadableIncludes) {
  const auto v = include_violations("metrics/exporter.cpp", "#include <string>\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].why.find("unknown folder src/metrics/"), std::string::npos) << v[0].why;
  EXPECT_FALSE(passes("util.cpp", ""));  // only main.cpp lives in src/ itself
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include \"webhook.h\"\n"));          // no folder
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include \"../server/x.h\"\n"));      // no escaping
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include \"metrics/exporter.h\"\n")); // unknown folder
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include \"nlohmann/json.hpp\"\n"));  // library in quotes
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include SERVER_HEADER\n"));          // computed
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include_next <boost/asio.hpp>\n"));
}

TEST(Layering, CheckerFindsIncludesHoweverTheyAreSpelled) {
  EXPECT_FALSE(passes("admission/webhook.cpp", "  #  include   \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp", "#include\"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp", "#\tinclude <cpprest/http_client.h>\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp",
                      "/* a comment */ #include \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp",
                      "const char* s = \"//\";\n#include \"server/https_server.h\"\n"));
  EXPECT_FALSE(passes("admission/webhook.cpp",
                      "auto r = R\"(/* not a comment)\";\n#include \"server/https_server.h\"\n"));
}

TEST(Layering, CheckerNamesTheLineAndTheInclude) {
  const auto v = include_violations("admission/webhook.cpp",
                                    "#include <string>\n"
                                    "/*\n a block\n comment\n*/\n"
                                    "#include \"model/pod.h\"\n"
                                    "#include \"server/https_server.h\"\n");
  ASSERT_EQ(v.size(), 1u) << describe(v);
  EXPECT_EQ(v[0].line, 7);
  EXPECT_EQ(v[0].include, "\"server/https_server.h\"");
  EXPECT_NE(v[0].why.find("admission may not include server/"), std::string::npos) << v[0].why;
}

TEST(Layering, CheckerAllowsWhatTheTableAllows) {
  EXPECT_TRUE(passes("admission/webhook.cpp",
                     "#include \"admission/webhook.h\"\n#include \"model/pod.h\"\n"
                     "#include \"policy/gate.h\"\n#include \"base/result.h\"\n"
                     "#include <nlohmann/json.hpp>\n#include <string>\n#include <atomic>\n"));
  EXPECT_TRUE(passes("policy/gate.cpp",
                     "#include \"policy/gate.h\"\n#include <cstdint>\n#include <optional>\n"
                     "#include <string_view>\n"));
  EXPECT_TRUE(passes("base/prometheus.cpp", "#include \"base/prometheus.h\"\n#include <cstdio>\n"));
  EXPECT_TRUE(passes("model/document.cpp",
                     "#include \"model/document.h\"\n#include <yaml-cpp/yaml.h>\n"
                     "#include <yaml-cpp/depthguard.h>\n#include <fstream>\n"));
  EXPECT_TRUE(passes("config/environment.h", "#include \"policy/gate.h\"\n#include <cstdlib>\n"));
  EXPECT_TRUE(passes("tls/server_context.h",
                     "#include \"config/log.h\"\n#include <boost/asio/ssl/context.hpp>\n"
                     "#include <openssl/ssl.h>\n#include <sys/stat.h>\n#include <thread>\n"));
  EXPECT_TRUE(passes("server/https_server.cpp",
                     "#include \"tls/server_context.h\"\n#include <boost/beast/http.hpp>\n"));
  EXPECT_TRUE(passes("kube/client.cpp",
                     "#include \"kube/client.h\"\n#include \"tls/certificates.h\"\n"
                     "#include \"config/log.h\"\n#include <cpprest/http_client.h>\n"
                     "#include <pplx/pplxtasks.h>\n#include <openssl/ssl.h>\n"
                     "#include <nlohmann/json.hpp>\n#include <yaml-cpp/yaml.h>\n"));
  EXPECT_TRUE(passes("controller/lookup.cpp",
                     "#include \"kube/store.h\"\n#include \"admission/context.h\"\n"
                     "#include \"model/component.h\"\n#include <nlohmann/json.hpp>\n#include <thread>\n"));
  EXPECT_TRUE(passes("cli/serve.cpp",
                     "#include \"controller/loops.h\"\n#include \"server/https_server.h\"\n"
                     "#include <CLI/CLI.hpp>\n#include <pthread.h>\n#include <signal.h>\n"));
  EXPECT_TRUE(passes("main.cpp", "#include \"cli/commands.h\"\n"));
  // A commented-out include, or one inside a string, does not count.
  EXPECT_TRUE(passes("admission/webhook.cpp",
                     "// #include \"server/https_server.h\"\n"
                     "/* #include <cpprest/http_client.h>\n   #include <thread> */\n"
                     "const char* s = \"#include <CLI/CLI.hpp>\";\n"));
  EXPECT_TRUE(passes("policy/gate.cpp", "int n = 1'000'000; // #include <iostream>\n"));
  // __has_include is not an include.
  EXPECT_TRUE(passes("cli/serve.cpp", "#if __has_include(<cpprest/json.h>)\n#endif\n"));
}

// --- The tree ----------------------------------------------------------------

TEST(Layering, EveryIncludeUnderSrcFollowsTheTable) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(IG_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  static constexpr std::string_view kSourceExtensions[] = {".h", ".hpp", ".hh", ".cpp", ".cc",
                                                           ".cxx", ".ipp", ".inl", ".inc"};
  std::size_t files = 0;
  std::vector<std::string> folders;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const auto rel = fs::relative(entry.path(), src).generic_string();
    if (entry.is_directory()) {
      // An empty new folder is already a new layer: it must be in the table.
      if (rel.find('/') == std::string::npos && find_layer(rel) == nullptr)
        ADD_FAILURE() << "src/" << rel << "/ is not in the layering table (tests/unit/layering_test.cpp)";
      continue;
    }
    if (!entry.is_regular_file()) continue;
    const auto ext = entry.path().extension().string();
    if (std::find(std::begin(kSourceExtensions), std::end(kSourceExtensions), ext) ==
        std::end(kSourceExtensions))
      continue;
    std::ifstream in(entry.path(), std::ios::binary);
    ASSERT_TRUE(in) << rel;
    std::stringstream buf;
    buf << in.rdbuf();
    ++files;
    for (const auto& v : include_violations(rel, buf.str()))
      ADD_FAILURE() << "src/" << rel << ":" << v.line << ": " << (v.include.empty() ? "" : v.include + ": ")
                    << v.why;
  }
  EXPECT_GT(files, 10u);
}

// controller/ has no threads of its own: its loops are reconcilers on the
// engine (src/runtime/, docs/architecture.md, "The engine"), which owns the
// threads. No file of controller/ includes <thread> or <condition_variable>.
TEST(Layering, ControllerOwnsNoThreads) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(IG_SOURCE_DIR) / "src";
  const fs::path dir = src / "controller";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<std::string> with_threads;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    ASSERT_TRUE(in);
    std::stringstream buf;
    buf << in.rdbuf();
    std::istringstream lines(strip_comments(buf.str()));
    std::string line;
    bool threads = false;
    while (std::getline(lines, line)) {
      std::string compact;
      for (char c : line)
        if (c != ' ' && c != '\t') compact += c;
      if (compact == "#include<thread>" || compact == "#include<condition_variable>") threads = true;
    }
    if (threads) with_threads.push_back(fs::relative(entry.path(), src).generic_string());
  }
  EXPECT_TRUE(with_threads.empty())
      << "src/" << (with_threads.empty() ? std::string() : with_threads.front())
      << " includes <thread> or <condition_variable>: controller/ runs its loops on the engine (runtime/), "
      << "which owns the threads";
}

// The operator's loops read time through the one Clock (base/clock.h): no
// direct clock reads, sleeps or time hooks of their own in controller/,
// runtime/ or kube/. The named exceptions wait on real I/O (a socket, a
// credential plugin's process), which no fake clock can move.
TEST(Layering, TheOperatorReadsTimeThroughTheOneClock) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(IG_SOURCE_DIR) / "src";
  const std::vector<std::string> exceptions = {"kube/http_client.cpp", "kube/exec_credential.cpp"};
  const std::vector<std::string> forbidden = {"steady_clock::now", "system_clock::now", "SteadyClock::now",
                                              "std::time(",        "this_thread::sleep", "time_point()>"};
  std::size_t files = 0;
  for (const char* folder : {"controller", "runtime", "kube"}) {
    for (const auto& entry : fs::directory_iterator(src / folder)) {
      const std::string rel = fs::relative(entry.path(), src).generic_string();
      if (!entry.is_regular_file() || std::find(exceptions.begin(), exceptions.end(), rel) != exceptions.end())
        continue;
      ++files;
      std::ifstream in(entry.path(), std::ios::binary);
      ASSERT_TRUE(in);
      std::stringstream buf;
      buf << in.rdbuf();
      std::string code;
      for (char c : strip_comments(buf.str()))
        if (c != ' ' && c != '\t') code += c;
      for (const auto& f : forbidden)
        EXPECT_EQ(code.find(f), std::string::npos) << "src/" << rel << " uses " << f << ": read time through base/clock.h";
    }
  }
  EXPECT_GT(files, 30u);
}

}  // namespace
