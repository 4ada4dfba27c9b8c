"""IR -> ONNX protos, ONNX protos -> IR, IR -> Python source, and the onnxquill command."""
