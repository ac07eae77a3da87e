;; Adversarial: imports a function the host does not provide (AssemblyScript's env.abort).
;; Expect LoadError::UnknownImport naming env.abort when the profile is loaded.
(module
  (import "env" "abort" (func (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32 i32 i32) (result i32) (i32.const 0)))
