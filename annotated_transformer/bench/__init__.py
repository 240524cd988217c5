"""Part V's measurements and exports: benchmarks, the fast path, op profiles, scaling, CTranslate2, ONNX."""
