#include "rollout/worker_main.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <tuple>
#include <optional>
#include <thread>

#include "core/config.h"
#include "core/endpoint.h"
#include "core/error.h"
#include "core/stop_signals.h"
#include "model/checkpoint.h"
#include "model/lora.h"
#include "model/lora_unmerged.h"
#include "model/init.h"
#include "model/numerics.h"

namespace rlcpp {

namespace {

// SIGTERM and SIGINT become readable events on a signalfd that the serve loop polls with its socket, so a
// signal ends the loop between messages (or between engine steps) instead of interrupting it anywhere.
// Blocked before any thread starts, so every thread inherits the mask.
int stop_signal_fd() {
  const sigset_t set = block_stop_signals("worker");
  const int fd = signalfd(-1, &set, SFD_CLOEXEC);
  RLCPP_CHECK(fd >= 0, "worker: signalfd failed");
  return fd;
}

// A stop signal during start-up (loading a large checkpoint, packing its weights) ends the process at once:
// nothing is bound or written yet, so there is nothing to clean up. Watching ends when start-up does; from then
// on the serve loop reads the signalfd. The watcher only polls it, so a signal it did not act on stays pending.
class StartupStopWatch {
 public:
  explicit StartupStopWatch(int stop_fd) : done_fd_(eventfd(0, EFD_CLOEXEC)) {
    RLCPP_CHECK(done_fd_ >= 0, "worker: eventfd failed");
    thread_ = std::thread([this, stop_fd] {
      pollfd fds[2] = {{stop_fd, POLLIN, 0}, {done_fd_, POLLIN, 0}};
      while (::poll(fds, 2, -1) < 0 && errno == EINTR) {
      }
      if ((fds[0].revents & POLLIN) && !(fds[1].revents & POLLIN)) {
        std::printf("%s\n", Json{{"event", "stopped"}, {"served", 0}, {"during", "start-up"}}.dump().c_str());
        std::fflush(stdout);
        std::_Exit(0);
      }
    });
  }
  void finished() {
    if (!thread_.joinable()) return;
    const uint64_t one = 1;
    (void)!::write(done_fd_, &one, sizeof one);
    thread_.join();
    ::close(done_fd_);
  }
  ~StartupStopWatch() { finished(); }

 private:
  int done_fd_;
  std::thread thread_;
};



// Loads the model, listens (or connects) and serves until shutdown or SIGTERM; returns the exit status.
int serve_worker(WorkerProcessConfig& a, const WeightFeedFactory& make_weights) {
  RLCPP_CHECK(a.bind.empty() || a.connect.empty(), "worker: give --bind or --connect, not both");
  RLCPP_CHECK(a.checkpoint.empty() != a.preset.empty(), "worker: give a checkpoint directory or --preset");
  // Before the model loads: a port outside 1..65535 (libzmq would take 70000 as 70000 mod 2^16), or "any port"
  // to connect to.
  for (const auto& [option, endpoint, use] : {std::tuple{"--bind", a.bind, EndpointUse::kBind},
                                              {"--weights", a.weights, EndpointUse::kBind},
                                              {"--connect", a.connect, EndpointUse::kConnect}}) {
    if (endpoint.empty()) continue;
    try {
      parse_endpoint(endpoint, use);
    } catch (const Error& e) {
      RLCPP_FAIL("worker " << option << ": " << e.what());
    }
  }
  // At least a header's room; at most 64 GiB (ZeroMQ's frame cap is twice it, and a generate request is tokens).
  RLCPP_CHECK(a.max_message_mib >= 1 && a.max_message_mib <= 65536,
              "worker: --max-message-mib must be in [1, 65536], got " << a.max_message_mib);
  a.worker.limits.max_message_bytes = static_cast<int64_t>(a.max_message_mib * (1 << 20));
  RLCPP_CHECK(!a.curve_key.empty() || (a.curve_clients.empty() && a.curve_server.empty()),
              "worker: --curve-clients and --curve-server need --curve-key, this worker's own key pair (rlcpp keys)");
  if (!a.curve_key.empty()) a.worker.curve.keys = load_curve_key_file(a.curve_key);
  for (const std::string& file : a.curve_clients) a.worker.curve.clients.push_back(load_curve_public_key(file));
  if (!a.curve_server.empty()) a.worker.curve.server_public = load_curve_public_key(a.curve_server);
  if (!a.inject_fault.empty()) a.worker.fault_hook = parse_fault(a.inject_fault);
  RLCPP_CHECK(a.throttle_ms >= 0 && a.throttle_ms <= 60000,
              "worker: --throttle-ms must be in [0, 60000], got " << a.throttle_ms);
  if (a.throttle_ms > 0) {
    const auto pause = std::chrono::duration<double, std::milli>(a.throttle_ms);
    a.worker.fault_hook = [fault = std::move(a.worker.fault_hook), pause](int64_t request, int64_t step) {
      std::this_thread::sleep_for(pause);
      if (fault) fault(request, step);
    };
  }
  const int stop_fd = stop_signal_fd();
  StartupStopWatch startup(stop_fd);
  ParameterStore params = a.checkpoint.empty() ? init_random(model_preset(a.preset), a.init_seed)
                                               : load_model_checkpoint(a.checkpoint);
  // A LoRA run's worker keeps the frozen base and its adapters: each version's adapters are merged into the base
  // here (the same fma chains as the trainer's merge, so the same weights bit for bit).
  std::optional<ParameterStore> lora_base;
  std::optional<LoraAdapters> adapters;
  std::optional<LoraAdapters> pending_adapters;  // announced by a LoRA base message being received
  RLCPP_CHECK(!a.lora_unmerged || !a.lora_base.empty(), "worker: --lora-unmerged needs --lora-base");
  if (!a.lora_base.empty()) {
    RLCPP_CHECK(!a.checkpoint.empty(), "worker: --lora-base needs a checkpoint whose adapter/ holds the adapters");
    lora_base = load_model_checkpoint(a.lora_base);
    RLCPP_CHECK(lora_base->numel() == params.numel(), "worker: --lora-base " << a.lora_base << " is not a model of the "
                                                                             << "checkpoint's shape");
    adapters = LoraAdapters::load_peft(a.checkpoint + "/adapter", lora_base->config());
  }
  // Built for the engine's context (--max-context), so its RoPE table is no larger than what it serves.
  const ModelNumerics numerics =
      make_numerics(a.dtype, a.quantization, a.batch_invariant, "worker --dtype", "worker --quantization");
  check_numerics_device(numerics, parse_device_spec(a.worker.device, "worker --device").device, "worker --dtype",
                        "worker --batch-invariant");
  const Transformer model(engine_model_config(params.config(), a.worker.engine), numerics);
  // Declared before the sockets' owners, so that on every way out (a failed bind, an exception while serving)
  // they are closed before the context's destructor waits for them.
  zmq::context_t context;
  // Admits the --curve-clients keys on the sockets bound with CURVE; outlives them (declared after the context).
  std::optional<ZapHandler> zap;
  if (a.worker.curve.configured()) a.worker.curve.zap = &zap.emplace(context);
  WorkerService service(model, params, a.worker, a.policy_version);
  service.advertise("numerics", model.numerics().describe());
  service.advertise("device", service.engine().context().name());
  std::string endpoint;
  if (!a.connect.empty()) {
    service.connect(context, a.connect);
    endpoint = a.connect;
  } else {
    std::string bind = a.bind;
    if (bind.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(a.run_dir, ec);
      RLCPP_CHECK(!ec && std::filesystem::is_directory(a.run_dir),
                  "worker: --run-dir '" << a.run_dir << "' cannot be made a directory"
                                        << (ec ? ": " + ec.message() : std::string(" (a file is there)")));
      bind = "ipc://" + a.run_dir + "/worker.ipc";
    }
    endpoint = service.bind(context, bind);
  }
  // The engine takes the weights as its own: prepared once (a bf16 worker's in bf16 alone) and the fp32 store
  // released. Weights published by the trainer replace them between requests, the same way.
  const ModelConfig model_config = params.config();
  // Unmerged adapters (--lora-unmerged, or a LoRA base message asking for them): the engine keeps the base as
  // prepared once, and each version replaces the adapters alone.
  bool unmerged = a.lora_unmerged;
  auto take_adapters = [&](int64_t version) {
    service.engine().set_adapters(std::make_shared<UnmergedLora>(*adapters), version);
  };
  if (unmerged) {
    service.engine().take_weights(*lora_base, a.policy_version);
    lora_base.reset();  // the engine's prepared copy is all it reads
    params = ParameterStore();  // the checkpoint's merged model: not read
    take_adapters(a.policy_version);
  } else {
    service.engine().take_weights(std::move(params), a.policy_version);
  }
  std::unique_ptr<WeightFeed> weights;
  ServeControl control{nullptr, stop_fd};
  if (a.exit_with_parent) control.parent = getppid();
  std::string weights_endpoint;
  if (!a.weights.empty()) {
    weights = make_weights(context, a.weights, model_config, a.policy_version, a.worker.curve,
                           service.engine().context(),
                           adapters ? adapters->weights().infos() : std::vector<ParameterInfo>{});
    if (!adapters) {
      // A remote trainer of a LoRA run sends its frozen base once with the adapters' config, then each version's
      // adapters alone (a few MB instead of the model): the same merge as the trainer's, so the same weights.
      weights->take_lora_bases([&](const Json& lora) {
        pending_adapters.emplace(model_config, lora_config_from_wire(lora));
        unmerged = lora.value("unmerged", false);
        return pending_adapters->weights().infos();
      });
      service.advertise("lora_sync", true);
    }
    weights_endpoint = weights->endpoint();
    // A worker that joins a listening trainer says where to send it weights, and with which key.
    service.advertise("weights_endpoint", weights_endpoint);
    if (a.worker.curve.configured()) service.advertise("curve_public", a.worker.curve.keys.public_key);
    control.extra_socket = &weights->socket();
    control.on_extra = [&]() {
      weights->receive([&](ParameterStore w, int64_t version) {
        const int64_t model_floats = model_config.num_parameters();
        if (pending_adapters && w.numel() == model_floats + pending_adapters->weights().numel()) {
          // A LoRA base: the frozen base's parameters, then the adapters'.
          lora_base = ParameterStore::allocate(model_config, ExecContext::cpu());
          std::copy_n(w.flat().data<float>(), model_floats, lora_base->flat().data<float>());
          adapters = std::move(pending_adapters);
          pending_adapters.reset();
          std::copy_n(w.flat().data<float>() + model_floats, adapters->weights().numel(),
                      adapters->weights().flat().data<float>());
          if (unmerged) {
            service.engine().take_weights(std::move(*lora_base), version);
            lora_base.reset();
            take_adapters(version);
            return;
          }
          w = ParameterStore::allocate(model_config, ExecContext::cpu());
          adapters->merge(ExecContext::cpu(), *lora_base, w);
        } else if (adapters && a.lora_base.empty() && w.numel() == model_floats &&
                   w.numel() != adapters->weights().numel()) {
          adapters.reset();  // a whole model after a LoRA run's adapters: a run without LoRA rebased this worker
          lora_base.reset();
          unmerged = false;
        } else if (adapters && unmerged) {  // the adapters alone, applied unmerged beside the base
          std::copy_n(w.flat().data<float>(), w.numel(), adapters->weights().flat().data<float>());
          take_adapters(version);
          return;
        } else if (adapters) {  // the adapters alone: merged into the base, as the trainer merged them
          std::copy_n(w.flat().data<float>(), w.numel(), adapters->weights().flat().data<float>());
          w = ParameterStore::allocate(model_config, ExecContext::cpu());
          adapters->merge(ExecContext::cpu(), *lora_base, w);
        }
        // Whole weights (merged, or a run without LoRA): no adapters beside them, whatever ran before.
        if (service.engine().adapters()) service.engine().set_adapters(nullptr, version);
        service.engine().take_weights(std::move(w), version);
      });
    };
  }
  startup.finished();
  // One JSON line a launcher can wait for.
  std::printf("%s\n", Json{{"event", a.connect.empty() ? "listening" : "connected"},
                           {"weights_endpoint", weights_endpoint},
                           {"endpoint", endpoint},
                           {"pid", static_cast<int64_t>(getpid())},
                           {"kv_bytes_per_token", service.engine().kv_bytes_per_token()},
                           {"num_blocks", service.engine().num_blocks()}}
                          .dump()
                          .c_str());
  std::fflush(stdout);
  const int64_t served = service.serve(control);
  if (!weights_endpoint.empty() && weights_endpoint.rfind("ipc://", 0) == 0) {
    std::error_code ignored;
    std::filesystem::remove(weights_endpoint.substr(6), ignored);
  }
  if (a.connect.empty() && endpoint.rfind("ipc://", 0) == 0) {
    std::error_code ignored;  // the socket file of a bound ipc endpoint; a later bind would replace it anyway
    std::filesystem::remove(endpoint.substr(6), ignored);
  }
  std::printf("%s\n", Json{{"event", "stopped"}, {"served", served}}.dump().c_str());
  close(stop_fd);
  return 0;
}

}  // namespace

std::function<void(int64_t, int64_t)> parse_fault(const std::string& spec) {
  const size_t a = spec.find(':'), b = spec.find(':', a == std::string::npos ? a : a + 1);
  RLCPP_CHECK(a != std::string::npos && b != std::string::npos,
              "worker: --inject-fault '" << spec << "': expected ACTION:REQUEST:STEP, e.g. kill:3:2");
  const std::string action = spec.substr(0, a);
  RLCPP_CHECK(action == "kill" || action == "stop" || action == "exit",
              "worker: --inject-fault '" << spec << "': action '" << action << "', expected kill, stop or exit");
  int64_t request = 0, step = 0;
  try {
    request = std::stoll(spec.substr(a + 1, b - a - 1));
    step = std::stoll(spec.substr(b + 1));
  } catch (const std::exception&) {
    RLCPP_FAIL("worker: --inject-fault '" << spec << "': REQUEST and STEP must be integers");
  }
  RLCPP_CHECK(request >= 1 && step >= 1, "worker: --inject-fault '" << spec << "': REQUEST and STEP count from 1");
  return [=](int64_t r, int64_t s) {
    if (r != request || s != step) return;
    std::fprintf(stderr, "worker: injected fault '%s' at request %lld step %lld\n", spec.c_str(),
                 static_cast<long long>(r), static_cast<long long>(s));
    if (action == "exit") _exit(3);
    raise(action == "kill" ? SIGKILL : SIGSTOP);
  };
}

int run_worker_process(WorkerProcessConfig& config, const WeightFeedFactory& weights) {
  try {
    return serve_worker(config, weights);
  } catch (const std::exception& e) {
    // A worker that cannot serve (a port in use, a bad engine setting) says why on stdout too, as the JSON
    // line its launcher reads in place of "listening" (loop/worker_process.h); then it fails as any command.
    std::printf("%s\n", Json{{"event", "error"}, {"message", e.what()}}
                            .dump(-1, ' ', false, Json::error_handler_t::replace)
                            .c_str());
    std::fflush(stdout);
    throw;
  }
}

}  // namespace rlcpp
