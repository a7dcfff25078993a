#include "common.hpp"

#include <openssl/evp.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

namespace hp {

std::string sha256_hex(const std::string& data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

void log_line(const std::string& who, const std::string& msg) {
    static std::mutex m;
    std::lock_guard<std::mutex> g(m);
    std::string line = msg;
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::cerr << who << ": " << line << std::endl;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw BundleError(path + " cannot be read");
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_file_atomic(const std::string& path, const std::string& data) {
    std::string tmp = path + ".part";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw std::runtime_error("cannot write " + tmp);
        f.write(data.data(), static_cast<std::streamsize>(data.size()));
        if (!f) throw std::runtime_error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

long peak_rss_kb() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int> process_cores() {
    static std::vector<int> cores = [] {
        std::vector<int> out;
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof(set), &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; ++c)
                if (CPU_ISSET(c, &set)) out.push_back(c);
        return out;
    }();
    return cores;
}

void pin_thread(const std::vector<int>& cores) {
    thread_local std::vector<int> current;
    const std::vector<int>& want = cores.empty() ? process_cores() : cores;
    if (want == current) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : want) CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof(set), &set) == 0) current = want;
}

ov::element::Type element_type(const std::string& dtype) {
    static const std::map<std::string, ov::element::Type> types = {
        {"float32", ov::element::f32}, {"float16", ov::element::f16}, {"float64", ov::element::f64},
        {"int64", ov::element::i64},   {"int32", ov::element::i32},   {"int8", ov::element::i8},
        {"uint8", ov::element::u8},    {"bool", ov::element::boolean}};
    auto it = types.find(dtype);
    if (it == types.end()) throw BundleError("manifest: dtype '" + dtype + "' is not one this agent feeds");
    return it->second;
}

ov::Tensor input_tensor(const json& spec, const std::string& inputs_dir) {
    const std::string name = spec.at("name").get<std::string>();
    if (!spec.at("shape").is_array()) throw BundleError("manifest.inputs: '" + name + "' has no static shape");
    ov::Shape shape;
    for (auto& d : spec.at("shape")) shape.push_back(d.get<size_t>());
    ov::Tensor t(element_type(spec.at("dtype").get<std::string>()), shape);
    auto* bytes = static_cast<char*>(t.data());
    if (!inputs_dir.empty()) {
        std::string data = read_file(inputs_dir + "/" + name + ".bin");
        if (data.size() != t.get_byte_size())
            throw BundleError("--inputs: " + name + ".bin has " + std::to_string(data.size()) + " bytes, the input needs " +
                              std::to_string(t.get_byte_size()));
        std::copy(data.begin(), data.end(), bytes);
    } else if (t.get_element_type() == ov::element::f32) {
        float* p = t.data<float>();
        for (size_t i = 0; i < t.get_size(); ++i) p[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    } else {
        std::fill(bytes, bytes + t.get_byte_size(), 0);
    }
    return t;
}

json check_manifest(const std::string& raw) {
    json m;
    try {
        m = json::parse(raw);
    } catch (const json::exception& e) {
        throw BundleError(std::string("manifest: not JSON (") + e.what() + ")");
    }
    if (!m.is_object() || m.value("format", "") != "hetero-planner-bundle/1")
        throw BundleError("manifest.format: expected 'hetero-planner-bundle/1'");
    if (!m.contains("slices") || !m["slices"].is_array() || m["slices"].empty())
        throw BundleError("manifest.slices: no slices");
    for (const char* key : {"inputs", "outputs"})
        if (!m.contains(key) || !m[key].is_array()) throw BundleError(std::string("manifest.") + key + ": missing");
    size_t i = 0;
    for (auto& s : m["slices"]) {
        const std::string at = "manifest.slices[" + std::to_string(i++) + "].";
        for (const char* key : {"file", "sha256", "bytes", "inputs", "outputs", "settings"})
            if (!s.contains(key)) throw BundleError(at + key + ": missing");
        const std::string file = s["file"].get<std::string>();
        if (file.find('/') != std::string::npos || file.empty() || file[0] == '.')
            throw BundleError(at + "file: '" + file + "' must be a plain file name");
        const std::string sha = s["sha256"].get<std::string>();
        if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos)
            throw BundleError(at + "sha256: not a sha256");
        if (s["settings"].value("runtime", "") != "openvino")
            throw BundleError(at + "settings.runtime: '" + s["settings"].value("runtime", "") +
                              "'; the native agent runs OpenVINO slices only (bundle with ID=openvino[:DEVICE][,k=v])");
    }
    return m;
}

void verify_slice(const json& s, const std::string& data, size_t index) {
    const std::string at = "manifest.slices[" + std::to_string(index) + "]";
    const auto want = s.at("bytes").get<size_t>();
    if (data.size() != want)
        throw BundleError(at + ".bytes: " + s.at("file").get<std::string>() + " has " + std::to_string(data.size()) +
                          " bytes, the manifest says " + std::to_string(want) + " (truncated?)");
    if (sha256_hex(data) != s.at("sha256").get<std::string>())
        throw BundleError(at + ".sha256: " + s.at("file").get<std::string>() + " does not match its sha256");
}

ov::Core& core() {
    static ov::Core c;
    return c;
}

ov::AnyMap properties(const json& settings) {
    ov::AnyMap props;
    if (settings.contains("properties") && settings["properties"].is_object())
        for (auto& [k, v] : settings["properties"].items()) props[k] = v.is_string() ? v.get<std::string>() : v.dump();
    return props;
}

static std::vector<int> cores_of(const json& settings) {
    std::vector<int> cores;
    if (settings.contains("affinity") && settings["affinity"].is_array())
        for (auto& c : settings["affinity"]) cores.push_back(c.get<int>());
    return cores;
}

ov::CompiledModel compile(const std::string& path, const json& settings) {
    const auto cores = cores_of(settings);
    pin_thread(cores);  // the threads the plug-in creates now inherit these cores
    try {
        auto model = core().read_model(path);
        auto compiled = core().compile_model(model, settings.value("target", "CPU"), properties(settings));
        pin_thread({});
        return compiled;
    } catch (...) {
        pin_thread({});
        throw;
    }
}

std::unique_ptr<Bundle> compile_bundle(const json& manifest, const std::string& dir, bool by_hash) {
    auto b = std::make_unique<Bundle>();
    b->manifest = manifest;
    if (manifest.contains("plan_id") && manifest["plan_id"].is_string()) b->plan_id = manifest["plan_id"];
    b->pool = manifest.value("pool", "stop");
    for (auto& o : manifest["outputs"]) b->outputs.push_back(o.at("name").get<std::string>());
    for (auto& s : manifest["slices"]) {
        Slice sl;
        const std::string file = by_hash ? s["sha256"].get<std::string>() + ".onnx" : s["file"].get<std::string>();
        sl.compiled = compile(dir + "/" + file, s["settings"]);
        sl.cores = cores_of(s["settings"]);
        pin_thread(sl.cores);
        sl.request = sl.compiled.create_infer_request();
        pin_thread({});
        for (auto& x : s["inputs"]) sl.inputs.push_back(x.at("name").get<std::string>());
        for (auto& x : s["outputs"]) sl.outputs.push_back(x.at("name").get<std::string>());
        b->slices.push_back(std::move(sl));
    }
    return b;
}

std::map<std::string, ov::Tensor> run_frame(Bundle& b, const std::map<std::string, ov::Tensor>& inputs,
                                            std::vector<double>& slice_ms, std::vector<double>* infer_ms) {
    std::map<std::string, ov::Tensor> env(inputs);
    slice_ms.clear();
    if (infer_ms) infer_ms->clear();
    for (auto& s : b.slices) {
        auto t0 = std::chrono::steady_clock::now();
        pin_thread(s.cores);
        if (s.bound.size() != s.inputs.size()) s.bound.assign(s.inputs.size(), nullptr);
        for (size_t k = 0; k < s.inputs.size(); ++k) {
            auto it = env.find(s.inputs[k]);
            if (it == env.end()) throw std::runtime_error("tensor '" + s.inputs[k] + "' is not produced before its slice");
            // no copy: the producer's tensor itself, bound once (a producer writes the same memory every frame)
            if (it->second.data() != s.bound[k]) {
                s.request.set_tensor(s.inputs[k], it->second);
                s.bound[k] = it->second.data();
            }
        }
        auto i0 = std::chrono::steady_clock::now();
        s.request.infer();
        if (infer_ms)
            infer_ms->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - i0).count());
        for (auto& name : s.outputs) env[name] = s.request.get_tensor(name);
        slice_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::map<std::string, ov::Tensor> out;
    for (auto& name : b.outputs) out[name] = env.at(name);
    return out;
}

void dump_outputs(const std::map<std::string, ov::Tensor>& outputs, const std::string& dir) {
    mkdir(dir.c_str(), 0755);  // one level, as --dump-outputs names it; an existing one is fine
    for (auto& [name, t] : outputs) {
        std::string safe = name;
        for (auto& ch : safe)
            if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') ch = '_';
        const char* p = static_cast<const char*>(t.data());
        write_file_atomic(dir + "/" + safe + ".bin", std::string(p, p + t.get_byte_size()));
    }
}

}  // namespace hp
