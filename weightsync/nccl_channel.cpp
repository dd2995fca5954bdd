#include "weightsync/nccl_channel.h"

#include "model/weight_checksum.h"
#include "weightsync/weight_message.h"

namespace rlcpp {

namespace {

constexpr const char* kJoin = "nccl_join";
constexpr const char* kTransport = "nccl";

[[noreturn]] void refuse(const std::string& what) { throw WireError("weights message refused (nccl): " + what); }

template <class T> T field(const Json& header, const char* key) { return weights_header_field<T>(header, key); }

}  // namespace

WireMessage nccl_join_message(const std::string& id, int rank, int world, double timeout_s) {
  WireMessage m(kJoin);
  m.header["rank"] = rank;
  m.header["world"] = world;
  m.header["timeout_s"] = timeout_s;
  m.add<uint8_t>("nccl_id", std::vector<uint8_t>(id.begin(), id.end()));
  return m;
}

WireMessage nccl_weights_message(const ExecContext& ctx, const ParameterStore& weights, int64_t version,
                                 int64_t bucket_floats) {
  RLCPP_CHECK(ctx.holds(weights.flat()) && ctx.is_gpu(),
              "nccl weight sync: the weights to publish must be on the trainer's GPU (" << ctx.name() << ")");
  WireMessage m("weights");
  m.header["version"] = version;
  m.header["transport"] = kTransport;
  m.header["total_floats"] = weights.numel();
  m.header["bucket_floats"] = bucket_floats;
  m.header["keyed_checksum"] = std::to_string(weights_keyed_checksum(ctx, weights.flat()));
  m.header["layout"] = layout_json(weights.infos());
  return m;
}

bool is_nccl_join_message(const WireMessage& message) { return message.type() == kJoin; }

bool is_nccl_weights_message(const WireMessage& message) {
  const auto t = message.header.find("transport");
  return t != message.header.end() && t->is_string() && t->get<std::string>() == kTransport;
}

NcclWeightImport::NcclWeightImport(const ExecContext& ctx) : ctx_(ctx) {}

void NcclWeightImport::join(const WireMessage& message) {
  if (!ctx_.is_gpu())
    refuse("this subscriber's weights live on " + ctx_.name() + "; NCCL joins workers on GPUs (rlcpp worker "
           "--device cuda:N)");
  const int rank = field<int>(message.header, "rank"), world = field<int>(message.header, "world");
  const double timeout_s = field<double>(message.header, "timeout_s");
  if (!message.has("nccl_id")) refuse("a join without its 'nccl_id'");
  if (world < 2 || rank < 1 || rank >= world)
    refuse("a join as rank " + std::to_string(rank) + " of " + std::to_string(world) +
           " (a worker is a rank in [1, world), the trainer rank 0)");
  world_.reset();  // a new world (a trainer that started again): the old communicator goes first
  try {
    world_ = std::make_unique<NcclWeightBroadcast>(ctx_, message.array("nccl_id").bytes, rank, world, timeout_s);
  } catch (const WireError&) {
    throw;
  } catch (const std::exception& e) {
    refuse(e.what());
  }
}

ParameterStore NcclWeightImport::receive(const WireMessage& message, const ModelConfig& config, int64_t* version) {
  if (!world_) refuse("an announcement before this worker joined a world (no nccl_join came first)");
  const std::vector<ParameterInfo> layout = parameter_layout(config);
  const int64_t v = check_weights_header(message, layout, layout.back().offset + layout.back().numel());
  const std::string checksum = weights_header_text(message.header, "keyed_checksum");
  const auto bucket = field<int64_t>(message.header, "bucket_floats");
  if (bucket <= 0) refuse("bucket_floats " + std::to_string(bucket) + ", expected > 0");
  ParameterStore staged = ParameterStore::allocate(config, ctx_);
  try {
    world_->broadcast(staged.flat().data<float>(), staged.numel(), bucket, "the trainer (rank 0)");
  } catch (const std::exception& e) {
    world_.reset();  // aborted: the next version needs a new world
    refuse(std::string("version ") + std::to_string(v) + ": " + e.what());
  }
  check_device_copy(ctx_, staged, checksum, v, kTransport);
  *version = v;
  return staged;
}

}  // namespace rlcpp
