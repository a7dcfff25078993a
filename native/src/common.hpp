// What the native agent and the plain reference share: sha256, logging, tensors from a
// manifest's names/dtypes/shapes, pinning, compiling a model with a manifest slice's
// OpenVINO properties, and running a compiled bundle frame by frame.
#pragma once

#include <nlohmann/json.hpp>
#include <openvino/openvino.hpp>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hp {

using json = nlohmann::json;

// A bundle that must not run (hash mismatch, truncated file, bad manifest): the message names the file or field.
struct BundleError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string sha256_hex(const std::string& data);
void log_line(const std::string& who, const std::string& msg);  // one line on stderr, flushed
std::string read_file(const std::string& path);                 // throws BundleError
void write_file_atomic(const std::string& path, const std::string& data);
long peak_rss_kb();  // VmHWM of this process
double median(std::vector<double> v);

// The cores this process was started on, and moving the calling thread (no call when already there).
std::vector<int> process_cores();
void pin_thread(const std::vector<int>& cores);

ov::element::Type element_type(const std::string& dtype);
// A tensor of the manifest's dtype and shape: DIR/<name>.bin raw when inputs_dir is set, else a fixed pattern.
ov::Tensor input_tensor(const json& spec, const std::string& inputs_dir);

// The manifest checked for the fields this agent reads (BundleError naming the field).
json check_manifest(const std::string& raw);
// One slice file checked against the manifest's size and sha256 (BundleError naming it).
void verify_slice(const json& slice, const std::string& data, size_t index);

struct Slice {
    ov::CompiledModel compiled;
    ov::InferRequest request;
    std::vector<std::string> inputs, outputs;
    std::vector<int> cores;  // empty: every core of the process
    std::vector<const void*> bound;  // the memory each input was last bound to (set_tensor only when it moves)
};

struct Bundle {
    std::string plan_id, bundle_id, pool;
    long revision = -1;
    json manifest;
    std::vector<Slice> slices;
    std::vector<std::string> outputs;
};

ov::Core& core();
// Properties of a manifest slice as OpenVINO takes them (strings, parsed by the plug-in).
ov::AnyMap properties(const json& settings);
// Compile a model file (ONNX or IR) on the slice's target, on its cores (threads OpenVINO makes then inherit them).
ov::CompiledModel compile(const std::string& path, const json& settings);
// Every slice compiled from files already verified under dir (files named by the manifest's `file`,
// or by sha256 + ".onnx" when by_hash).
std::unique_ptr<Bundle> compile_bundle(const json& manifest, const std::string& dir, bool by_hash);

// One frame: the model's outputs by name and each slice's wall time (ms), pinning and tensor
// binding included; infer_ms (when given): each slice's `infer()` alone, its compute in the chain.
std::map<std::string, ov::Tensor> run_frame(Bundle& b, const std::map<std::string, ov::Tensor>& inputs,
                                            std::vector<double>& slice_ms, std::vector<double>* infer_ms = nullptr);
void dump_outputs(const std::map<std::string, ov::Tensor>& outputs, const std::string& dir);

}  // namespace hp
