#include "weightsync/cuda_ipc_channel.h"

#include <fstream>

#include "model/weight_checksum.h"
#include "weightsync/cuda_ipc_memory.h"
#include "weightsync/weight_message.h"

namespace rlcpp {

namespace {

constexpr const char* kTransport = "cuda-ipc";

[[noreturn]] void refuse(const std::string& what) { throw WireError("weights message refused (cuda-ipc): " + what); }

// This boot of this machine: an IPC handle opens only on the host (and boot) that exported it.
std::string host_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

bool is_cuda_ipc_message(const WireMessage& message) {
  const auto t = message.header.find("transport");
  return t != message.header.end() && t->is_string() && t->get<std::string>() == kTransport;
}

CudaIpcWeightExport::CudaIpcWeightExport(const ExecContext& ctx, const ModelConfig& config)
    : ctx_(ctx), layout_(parameter_layout(config)) {
  RLCPP_CHECK(ctx.is_gpu(),
              "cuda-ipc weight sync: the trainer's weights are on " << ctx.name() << "; the channel exports GPU "
                                                                       "memory (set device = cuda, or use zmq)");
  for (const ParameterInfo& p : layout_) total_floats_ = std::max(total_floats_, p.offset + p.numel());
  const size_t bytes = static_cast<size_t>(total_floats_) * sizeof(float);
  allocation_ = cuda_ipc::allocate_exportable(bytes, ctx.device_index());
  buffer_ = Tensor::from_storage(allocation_, {total_floats_}, DType::kF32, ctx.device());
  handle_ = cuda_ipc::export_handle(allocation_.get(), ctx.device_index());
  device_uuid_ = cuda_ipc::device_uuid(ctx.device_index());
}

WireMessage CudaIpcWeightExport::stage(const ParameterStore& weights, int64_t version) {
  RLCPP_CHECK(weights.numel() == total_floats_,
              "cuda-ipc weight sync: " << weights.numel() << " floats of weights for an export of " << total_floats_);
  RLCPP_CHECK(ctx_.holds(weights.flat()),
              "cuda-ipc weight sync: the weights to publish are on " << device_name(weights.flat().device())
                                                                     << ", not on the GPU");
  cuda_ipc::copy_device_to_device(buffer_.raw(), weights.flat().raw(), static_cast<size_t>(buffer_.nbytes()),
                                  ctx_.stream(), ctx_.device_index());
  checksum_ = std::to_string(weights_keyed_checksum(ctx_, buffer_));
  staged_version_ = version;
  return announce();
}

WireMessage CudaIpcWeightExport::announce() const {
  RLCPP_CHECK(staged_version_ >= 0, "cuda-ipc weight sync: nothing staged to announce yet");
  WireMessage m("weights");
  m.header["version"] = staged_version_;
  m.header["transport"] = kTransport;
  m.header["total_floats"] = total_floats_;
  m.header["device_uuid"] = device_uuid_;
  m.header["host_boot_id"] = host_boot_id();
  m.header["keyed_checksum"] = checksum_;  // as a decimal string: JSON numbers above 2^53 do not survive every parser
  m.header["layout"] = layout_json(layout_);
  m.add<uint8_t>("ipc_handle", std::vector<uint8_t>(handle_.begin(), handle_.end()));
  return m;
}

CudaIpcWeightImport::CudaIpcWeightImport(const ExecContext& ctx) : ctx_(ctx) {}

ParameterStore CudaIpcWeightImport::receive(const WireMessage& message, const ModelConfig& config, int64_t* version) {
  if (!ctx_.is_gpu())
    refuse("this subscriber's weights live on " + ctx_.name() + "; a GPU export is taken by a worker on a GPU "
           "(rlcpp worker --device cuda)");
  const std::vector<ParameterInfo> layout = parameter_layout(config);
  const int64_t v = check_weights_header(message, layout, layout.back().offset + layout.back().numel());
  const std::string uuid = weights_header_text(message.header, "device_uuid");
  const std::string boot = weights_header_text(message.header, "host_boot_id");
  const std::string checksum = weights_header_text(message.header, "keyed_checksum");
  if (!message.has("ipc_handle")) refuse("no 'ipc_handle' array");
  const WireArray& handle_array = message.array("ipc_handle");
  if (handle_array.dtype != WireDType::kU8) refuse("'ipc_handle' is " + std::string(wire_dtype_name(handle_array.dtype)) + ", expected u8");
  const std::string& handle = handle_array.bytes;
  if (boot != host_boot_id())
    refuse("the export is on another host (boot id " + boot + ", this host's " + host_boot_id() +
           "); cuda-ipc joins processes of one host (use zmq)");
  // The same GPU, or another GPU of this host that this process sees and can map (the copy then goes peer to
  // peer). The device of a UUID is looked up once (cudaGetDeviceProperties of every device is slow per sync).
  auto known = device_of_uuid_.find(uuid);
  if (known == device_of_uuid_.end()) known = device_of_uuid_.emplace(uuid, cuda_ipc::device_with_uuid(uuid)).first;
  const int owner = known->second;
  if (owner < 0)
    refuse("the export is on the GPU with UUID " + uuid + ", which this process does not see (it computes on " +
           ctx_.name() + ", UUID " + cuda_ipc::device_uuid(ctx_.device_index()) +
           "; check CUDA_VISIBLE_DEVICES, or use zmq)");
  if (!cuda_ipc::can_access_peer(ctx_.device_index(), owner))
    refuse("the export is on cuda:" + std::to_string(owner) + ", which " + ctx_.name() +
           " cannot access peer to peer (cudaDeviceCanAccessPeer is 0: GPUs across sockets, or a VM); put the "
           "workers on the trainer's GPU, or use nccl or zmq");
  ParameterStore staged = ParameterStore::allocate(config, ctx_);  // after the checks: nothing taken for a refusal
  try {
    if (!mapped_ || handle != mapped_handle_) {
      mapped_.reset();  // a new export (a restarted trainer): the old mapping goes first
      mapped_ = cuda_ipc::open_handle(handle, ctx_.device_index());
      mapped_handle_ = handle;
    }
    cuda_ipc::copy_device_to_device(staged.flat().raw(), mapped_.get(), static_cast<size_t>(staged.flat().nbytes()),
                                    ctx_.stream(), ctx_.device_index());
  } catch (const WireError&) {
    throw;
  } catch (const std::exception& e) {
    mapped_.reset();
    mapped_handle_.clear();
    refuse(std::string("version ") + std::to_string(v) + ": " + e.what());
  }
  check_device_copy(ctx_, staged, checksum, v, kTransport);
  *version = v;
  return staged;
}

}  // namespace rlcpp
