"""The device side of the planner: run a plan on ONNX Runtime.

Light enough for a board: it imports the plan and profile documents from
`planner.core` and otherwise only onnx, onnxruntime, numpy and httpx.

- `executor.runtime`: `parse_device("cpu1=CPUExecutionProvider:threads=1,affinity=0")`
  -> RuntimeDevice; `build_session(model, device)`.
- `executor.slicing`: `materialise`, `layers(model)` (fused layers, DAG, bytes),
  `split_model(layered, [(first, last), ...])`.
- `executor.quantize`: int8 static QDQ quantisation with calibration data.
- `executor.sessions`: `SlicedModel(layered, slices, devices).run(inputs)`,
  `SlicedModel.from_plan(layered, plan, devices)`, timing helpers.
- `executor.profiler`: per-layer and transfer measurements on runtime devices.
"""
