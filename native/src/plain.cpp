// hp-plain: the benchmark's reference, a minimal OpenVINO program. One model file in one
// compiled model with a manifest slice's settings (target, properties, cores), its inputs set
// once, then `infer()` back to back; prints the per-frame median and peak RSS as JSON.
//
//   hp-plain --model MODEL.onnx --manifest BUNDLE/manifest.json [--slice 0] [--frames 200] [--warmup 20]
#include "common.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>

int main(int argc, char** argv) {
    std::string model, manifest_path;
    int slice = 0, frames = 200, warmup = 20;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { std::cerr << "hp-plain: " << a << " needs a value\n"; std::exit(2); }
            return argv[++i];
        };
        if (a == "--model") model = next();
        else if (a == "--manifest") manifest_path = next();
        else if (a == "--slice") slice = std::atoi(next().c_str());
        else if (a == "--frames") frames = std::atoi(next().c_str());
        else if (a == "--warmup") warmup = std::atoi(next().c_str());
        else { std::cerr << "hp-plain: unknown option " << a << "\n"; return 2; }
    }
    if (model.empty() || manifest_path.empty() || frames < 1) {
        std::cerr << "hp-plain: --model, --manifest and --frames >= 1 are needed\n";
        return 2;
    }
    try {
        auto manifest = hp::check_manifest(hp::read_file(manifest_path));
        const auto& settings = manifest["slices"].at(slice)["settings"];
        auto compiled = hp::compile(model, settings);
        std::vector<int> cores;
        if (settings.contains("affinity") && settings["affinity"].is_array())
            for (auto& c : settings["affinity"]) cores.push_back(c.get<int>());
        hp::pin_thread(cores);
        auto request = compiled.create_infer_request();
        for (auto& port : compiled.inputs()) {
            ov::Tensor t(port.get_element_type(), port.get_shape());
            if (t.get_element_type() == ov::element::f32) {
                float* p = t.data<float>();
                for (size_t k = 0; k < t.get_size(); ++k) p[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)));
            } else {
                std::fill(static_cast<char*>(t.data()), static_cast<char*>(t.data()) + t.get_byte_size(), 0);
            }
            request.set_tensor(port, t);
        }
        for (int k = 0; k < warmup; ++k) request.infer();
        std::vector<double> ms;
        ms.reserve(frames);
        for (int k = 0; k < frames; ++k) {
            auto t0 = std::chrono::steady_clock::now();
            request.infer();
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        hp::json out = {{"model", model}, {"frames", frames}, {"frame_ms_median", hp::median(ms)},
                        {"frame_ms", ms}, {"peak_rss_kb", hp::peak_rss_kb()}};
        std::cout << out.dump() << std::endl;
    } catch (const std::exception& e) {
        hp::log_line("hp-plain", e.what());
        return 1;
    }
    return 0;
}
