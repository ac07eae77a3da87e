;; Adversarial: a filter without the ABI's alloc/clusters exports. Expect LoadError::MissingExport
;; when the profile is loaded (independent of failurePolicy).
(module
  (memory (export "memory") 1)
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_filter_v1") (param i32 i32 i32 i32) (result i32) (i32.const 0)))
