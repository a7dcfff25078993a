"""The device side of the planner: run a plan on ONNX Runtime or OpenVINO.

Light enough for a board: it imports the plan and profile documents from
`planner.core` and otherwise only onnx, onnxruntime, numpy and httpx (and openvino,
only when a device names it).

- `executor.runtime`: `parse_device("cpu1=CPUExecutionProvider:threads=1,affinity=0")`
  or `parse_device("ov=openvino:CPU,threads=2")` -> RuntimeDevice; `build_session(model,
  device)` through the device's runtime.
- `executor.runtimes`: one module per runtime behind the `Runtime` protocol (build a
  session, quantise, version, targets, check a spec).
- `executor.slicing`: `materialise`, `layers(model)` (fused layers, DAG, bytes),
  `split_model(layered, [(first, last), ...])`.
- `executor.quantize`: int8 static QDQ quantisation with calibration data.
- `executor.sessions`: `SlicedModel(layered, slices, devices).run(inputs)`,
  `SlicedModel.from_plan(layered, plan, devices)`, timing helpers.
- `executor.profiler`: `profile_model(layered, devices, runs=...)`: per-layer, per-slice,
  device-switch and transfer samples (planner profile turns them into documents).
- `executor.execute`: `run_plan(layered, plan, devices, inputs)`: outputs checked against
  the unsplit fp32 model, per-slice and total latency beside the plan's prediction.
- `executor.bundle`: `make_bundle(plan, model, device_specs, out_dir)`: one ONNX file per
  slice and a manifest (order, tensors, settings, sha256) for the native agent (native/);
  `BundleRunner(dir)` runs one in Python after verifying every file.
- `executor.power`: energy readers (RAPL, hwmon, an external meter's CSV) or the reason
  there is none.

Timing takes a clock (`wall`, or `thread`: the calling thread's CPU time, for
single-threaded devices on a shared machine).
"""
