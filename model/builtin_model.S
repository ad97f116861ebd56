// The built-in default model (stories260K, see tests/data/README.md), linked into the
// binary so that `pagoda serve` with no --model serves a real model on a fresh clone.
// PAGODA_BUILTIN_MODEL_PATH is set by model/CMakeLists.txt.
  .section .rodata
  .balign 64
  .global pagoda_builtin_model_begin
pagoda_builtin_model_begin:
  .incbin PAGODA_BUILTIN_MODEL_PATH
  .global pagoda_builtin_model_end
pagoda_builtin_model_end:
  .section .note.GNU-stack, "", @progbits
