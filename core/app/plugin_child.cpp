#include "app/plugin_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "tandem/error.hpp"
#include "train/run.hpp"
#include "util/json_text.hpp"

extern char** environ;

namespace tandem::app {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How long a child may take to load and check plugins: a library that hangs in its constructor
// is reported rather than waited for.
constexpr int kChildSeconds = 30;

// --- the parent's side ----------------------------------------------------------------------

struct ChildOutput {
  std::string out;  // its standard output
  int status = 0;   // waitpid's status
  bool timed_out = false;
};

// A pipe whose ends are closed when it goes.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0)
      throw RunError(std::string("cannot create a pipe for a plugin child: ") +
                     std::strerror(errno));
  }
  ~Pipe() {
    close_end(0);
    close_end(1);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

// Runs `/proc/self/exe plugin-child` (this `tandem`), gives it `request` and collects its output
// until it exits or kChildSeconds pass (then it is killed).
ChildOutput run_child(const std::string& request) {
  Pipe in, out;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.fd[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], STDOUT_FILENO);
  char exe[] = "/proc/self/exe";
  char command[] = "plugin-child";
  char* argv[] = {exe, command, nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, exe, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw RunError(std::string("cannot start a plugin child process: ") + std::strerror(spawned));
  in.close_end(0);
  out.close_end(1);

  // The request is small next to a pipe's buffer, and the child reads all of it before it
  // writes: writing it whole first cannot deadlock. A child that died early gives EPIPE.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  std::size_t done = 0;
  while (done < request.size()) {
    const ssize_t n = ::write(in.fd[1], request.data() + done, request.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::sigaction(SIGPIPE, &previous, nullptr);
  in.close_end(1);

  ChildOutput result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kChildSeconds);
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{out.fd[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends it
    const ssize_t n = ::read(out.fd[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of output: the child has exited or closed it
    result.out.append(buffer, static_cast<std::size_t>(n));
  }
  while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

// How a child that gave no answer ended, in words.
std::string how_it_ended(const ChildOutput& child) {
  if (child.timed_out)
    return "it did not finish loading within " + std::to_string(kChildSeconds) + " s";
  if (WIFSIGNALED(child.status)) {
    const int sig = WTERMSIG(child.status);
    return "loading it crashed the process (signal " + std::to_string(sig) + ", " +
           ::strsignal(sig) + ")";
  }
  if (WIFEXITED(child.status))
    return "loading it ended the process (exit code " + std::to_string(WEXITSTATUS(child.status)) +
           ") before it answered";
  return "the process that loaded it ended before it answered";
}

struct ChildAnswer {
  std::optional<json> result;
  std::optional<json> error;
  std::string last_checking;  // the last {"checking": ...} line's subject, if any
  std::string last_checking_path;  // its callback entry's JSON path: "callbacks[2]"
};

ChildAnswer parse_answer(const std::string& out) {
  ChildAnswer answer;
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const json line = json::parse(out.begin() + static_cast<std::ptrdiff_t>(start),
                                  out.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    start = end + 1;
    if (!line.is_object()) continue;  // a plugin that printed to stdout
    if (line.contains("checking") && line["checking"].is_string()) {
      answer.last_checking_path = line["checking"].get<std::string>();
      answer.last_checking =
          answer.last_checking_path + " (plugin " + line.value("plugin", json("")).dump() + ")";
    }
    if (line.contains("result")) answer.result = line["result"];
    if (line.contains("error") && line["error"].is_object()) answer.error = line["error"];
  }
  return answer;
}

// The error the child reported, as the in-process check would have thrown it.
[[noreturn]] void rethrow(const json& error) {
  const std::string message = error.value("message", std::string("unknown error"));
  if (error.contains("path") && error["path"].is_string() && error.contains("what"))
    throw ConfigError(error["path"].get<std::string>(), error["what"].get<std::string>());
  if (error.value("code", 2) == static_cast<int>(ExitCode::run_failed)) throw RunError(message);
  throw PluginError(message);
}

// --- the child's side -------------------------------------------------------------------------

json error_json(const std::exception& e) {
  json error = {{"message", e.what()}, {"code", 1}};
  if (const auto* tandem_error = dynamic_cast<const Error*>(&e))
    error["code"] = static_cast<int>(tandem_error->code());
  if (const auto* config = dynamic_cast<const ConfigError*>(&e)) {
    const std::string prefix = "config error at '" + config->path() + "': ";
    const std::string message = e.what();
    error["path"] = config->path();
    error["what"] = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
  }
  return error;
}

void answer_line(const json& line) {
  std::cout << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
}

json probe_here(const json& request) {
  const PluginRecord record = PluginHost().load_file(request.at("probe").get<std::string>()).record;
  return {{"name", record.info.name},
          {"version", record.info.version},
          {"description", record.info.description},
          {"options_schema", record.info.options_schema}};
}

json check_here(const json& request) {
  const std::vector<CallbackConfig> callbacks = parse_callbacks(request.at("callbacks"));
  std::vector<fs::path> plugin_paths;
  for (const auto& p : request.at("plugin_paths")) plugin_paths.emplace_back(p.get<std::string>());
  const RunLength length{request.at("epochs").get<int>(),
                         request.at("steps_per_epoch").get<std::int64_t>()};
  json plugins = json::array();
  for (const auto& cc : callbacks) {
    answer_line({{"checking", cc.path}, {"plugin", cc.plugin}});
    for (auto& p : check_plugins({cc}, plugin_paths, length)) plugins.push_back(std::move(p));
  }
  return plugins;
}

int run_plugin_child() {
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  try {
    const json request = parse_json_text(text);
    answer_line({{"result", request.contains("probe") ? probe_here(request) : check_here(request)}});
  } catch (const std::exception& e) {
    answer_line({{"error", error_json(e)}});
  }
  return 0;
}

}  // namespace

PluginRecord probe_plugin_in_child(const fs::path& path) {
  const ChildOutput child = run_child(json{{"probe", path.string()}}.dump());
  const ChildAnswer answer = parse_answer(child.out);
  if (answer.error) throw PluginError(answer.error->value("message", std::string("unknown error")));
  if (!answer.result || !answer.result->is_object())
    throw PluginError("cannot load plugin " + path.string() + ": " + how_it_ended(child));
  PluginRecord record;
  record.path = path;
  record.info.name = answer.result->value("name", "");
  record.info.version = answer.result->value("version", "");
  record.info.description = answer.result->value("description", "");
  record.info.options_schema = answer.result->value("options_schema", json::object());
  return record;
}

json check_plugins_in_child(const std::vector<CallbackConfig>& callbacks,
                            const std::vector<fs::path>& plugin_paths, const RunLength& length) {
  if (callbacks.empty()) return json::array();
  json paths = json::array();
  for (const auto& p : plugin_paths) paths.push_back(p.string());
  const ChildOutput child = run_child(json{
      {"callbacks", callbacks_json(callbacks)},
      {"plugin_paths", paths},
      {"epochs", length.epochs},
      {"steps_per_epoch",
       length.steps_per_epoch}}.dump());
  const ChildAnswer answer = parse_answer(child.out);
  if (answer.error) rethrow(*answer.error);
  if (!answer.result || !answer.result->is_array()) {
    if (answer.last_checking_path.empty())
      throw PluginError("cannot check the callbacks' plugins: " + how_it_ended(child));
    // The entry whose plugin took the child down (check --json names its place).
    throw ConfigError(answer.last_checking_path + ".plugin",
                      "cannot check " + answer.last_checking + ": " + how_it_ended(child));
  }
  return *answer.result;
}

void add_plugin_child_command(CLI::App& app, std::function<int()>& selected) {
  auto* cmd = app.add_subcommand("plugin-child", "Loads plugins for `plugins` and `check`");
  cmd->group("");  // hidden: tandem runs it itself
  cmd->callback([&selected] { selected = [] { return run_plugin_child(); }; });
}

}  // namespace tandem::app
