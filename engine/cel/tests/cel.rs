//! The CEL engine: the Kubernetes dialect, the documented compile errors, and the runtime bounds.

use std::time::{Duration, Instant};

use flotilla_api::cluster::Cluster;
use flotilla_cel::{Engine, ExpressionEngine, ExpressionErrorKind, ExpressionKind, Limits};
use serde_json::{Value, json};

fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "eu-1", "labels": {"example.com/priority": "80", "tier": "gold"}},
        "spec": {"region": "eu-west", "zones": ["eu-west-1a"]},
        "status": {"resourceSummary": {"allocatable": {"cpu": "16", "memory": "64Gi"}, "allocated": {"cpu": "1500m"}}}
    }))
    .expect("cluster")
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "web", "image": "docker.io/library/nginx:1.27", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "sidecar", "image": "envoy:1.30"}
        ]}}}
    })
}

fn eval(
    engine: &Engine,
    kind: ExpressionKind,
    source: &str,
) -> Result<Value, flotilla_cel::ExpressionError> {
    let object = deployment();
    let bound = engine.bind(Some(&object))?;
    bound.evaluate(kind, source, &cluster())
}

fn value(source: &str) -> Value {
    let engine = Engine::default();
    engine
        .check(ExpressionKind::Value, source)
        .unwrap_or_else(|e| panic!("{source}: {e}"));
    eval(&engine, ExpressionKind::Value, source).unwrap_or_else(|e| panic!("{source}: {e}"))
}

#[test]
fn kubernetes_dialect_functions_evaluate() {
    let cases: &[(&str, Value)] = &[
        // variables and optionals
        ("clusterName", json!("eu-1")),
        ("clusterLabels['tier']", json!("gold")),
        ("cluster.spec.?missing.orValue('none')", json!("none")),
        ("object.spec.replicas * 2", json!(4)),
        (
            "has(object.metadata.labels) && 'app' in object.metadata.labels",
            json!(true),
        ),
        // macros
        (
            "object.spec.template.spec.containers.map(c, c.name)",
            json!(["web", "sidecar"]),
        ),
        (
            "object.spec.template.spec.containers.exists(c, c.image.startsWith('envoy'))",
            json!(true),
        ),
        (
            "object.spec.template.spec.containers.filter(c, has(c.resources)).size()",
            json!(1),
        ),
        // quantity
        (
            "quantity(cluster.status.resourceSummary.allocatable.cpu).isGreaterThan(quantity('4'))",
            json!(true),
        ),
        (
            "quantity('16').sub(quantity(cluster.status.resourceSummary.allocated.cpu)).asApproximateFloat()",
            json!(14.5),
        ),
        ("quantity('64Gi').compareTo(quantity('65536Mi'))", json!(0)),
        ("isQuantity('12x')", json!(false)),
        ("quantity('1500m').isInteger()", json!(false)),
        // semver
        (
            "semver('1.27.3').isGreaterThan(semver('1.9.0'))",
            json!(true),
        ),
        ("semver('v1.2', true).minor()", json!(2)),
        // regex
        (
            "'docker.io/library/nginx:1.27'.find('[^/]+$')",
            json!("nginx:1.27"),
        ),
        ("'a1b22c333'.findAll('[0-9]+')", json!(["1", "22", "333"])),
        ("'abc'.matches('^a')", json!(true)),
        // lists and sets
        ("[3, 1, 2].max()", json!(3)),
        ("[1, 2, 3].sum()", json!(6)),
        ("[1, 2, 3].isSorted()", json!(true)),
        ("['a', 'b'].indexOf('b')", json!(1)),
        ("sets.contains([1, 2, 3], [2])", json!(true)),
        ("sets.intersects([1, 2], [3])", json!(false)),
        // url, ip, cidr
        (
            "url('https://example.com:8443/a?x=1').getPort()",
            json!("8443"),
        ),
        (
            "url('https://example.com/a?x=1&x=2').getQuery()['x']",
            json!(["1", "2"]),
        ),
        ("cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", json!(true)),
        ("ip('fe80::1').isLinkLocalUnicast()", json!(true)),
        ("cidr('192.168.1.7/24').masked().prefixLength()", json!(24)),
        // strings, format, jsonpatch
        (
            "'Hello'.lowerAscii() + '-' + 'a,b'.split(',').join('+')",
            json!("hello-a+b"),
        ),
        (
            "'%s has %d replicas'.format([object.metadata.name, object.spec.replicas])",
            json!("web has 2 replicas"),
        ),
        (
            "jsonpatch.escapeKey('example.com/a~b')",
            json!("example.com~1a~0b"),
        ),
        (
            "{'b': 1, 'a': [true, null]}",
            json!({"a": [true, null], "b": 1}),
        ),
    ];
    for (src, want) in cases {
        assert_eq!(&value(src), want, "{src}");
    }
}

#[test]
fn syntax_errors_give_the_column() {
    let e = Engine::default()
        .check(ExpressionKind::ClusterSelector, "cluster.spec.region == ")
        .unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Syntax);
    assert!(e.message.starts_with("column "), "{}", e.message);
    assert!(e.message.contains("syntax error"), "{}", e.message);
    assert!(e.column.is_some());
}

#[test]
fn ill_typed_expressions_are_rejected_with_the_column() {
    let engine = Engine::default();
    let cases = [
        (
            "1 + 'a'",
            "column 3: type error: found no matching overload for '_+_' applied to '(int, string)'",
        ),
        (
            "cluster.spec.region == nosuch",
            "column 24: type error: undeclared reference to 'nosuch'",
        ),
        (
            "cluster.nosuchfn()",
            "column 17: type error: undeclared reference to 'nosuchfn'",
        ),
        (
            "quantity('1').isGreaterThan(1)",
            "column 28: type error: found no matching overload for 'isGreaterThan' applied to 'kubernetes.Quantity.(int)'",
        ),
        (
            "'abc'.size.x",
            "column 6: type error: type 'string' does not support field selection",
        ),
    ];
    for (src, want) in cases {
        let e = engine.check(ExpressionKind::Value, src).unwrap_err();
        assert_eq!(e.kind, ExpressionErrorKind::Type, "{src}: {e}");
        assert_eq!(e.message, want, "{src}");
    }
    // The result must suit its use.
    let e = engine
        .check(ExpressionKind::ClusterSelector, "cluster.spec.region + 'x'")
        .unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Type);
    assert!(e.message.contains("must evaluate to bool"), "{}", e.message);
    let e = engine
        .check(ExpressionKind::JsonPatch, "{'a': 1}")
        .unwrap_err();
    assert!(
        e.message.contains("a list of JSON patch operations"),
        "{}",
        e.message
    );
}

#[test]
fn too_expensive_expressions_are_rejected_at_validation() {
    let engine = Engine::default();
    let nested = "object.spec.template.spec.containers.all(a, object.spec.template.spec.containers.all(b, \
                  object.spec.template.spec.containers.all(c, a.name + b.name + c.name != '')))";
    let e = engine
        .check(ExpressionKind::ClusterSelector, nested)
        .unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Cost, "{e}");
    assert!(e.message.starts_with("estimated cost "), "{}", e.message);
    assert!(
        e.message.contains("exceeds the limit of 1000000"),
        "{}",
        e.message
    );
    // A range that depends on the input is unbounded.
    let e = engine
        .check(ExpressionKind::Value, "lists.range(object.spec.replicas)")
        .unwrap_err();
    assert!(
        e.message.contains("estimated cost unbounded"),
        "{}",
        e.message
    );
    // One comprehension over the object is fine.
    engine
        .check(
            ExpressionKind::ClusterSelector,
            "object.spec.template.spec.containers.all(c, c.image.contains(':'))",
        )
        .expect("cheap");
}

#[test]
fn a_runaway_expression_is_refused_before_it_runs() {
    // Passes the static check (typical object) but is quadratic in the list length: on an object with
    // a 3,000-element list the runtime bound refuses it in microseconds instead of running ~10^10 steps.
    let engine = Engine::default();
    let src = "object.items.all(a, object.items.all(b, true))";
    engine
        .check(ExpressionKind::ClusterSelector, src)
        .expect("passes at reference sizes");
    let big = json!({"items": (0..3000).collect::<Vec<i64>>()});
    let bound = engine.bind(Some(&big)).expect("bind");
    let start = Instant::now();
    let e = bound
        .evaluate(ExpressionKind::ClusterSelector, src, &cluster())
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(e.kind, ExpressionErrorKind::Limit);
    assert!(
        e.message.contains("exceeds the runtime limit"),
        "{}",
        e.message
    );
    // The same expression on a small object runs.
    let small = json!({"items": [1, 2, 3]});
    let v = engine
        .bind(Some(&small))
        .expect("bind")
        .evaluate(ExpressionKind::ClusterSelector, src, &cluster())
        .expect("runs");
    assert_eq!(v, json!(true));
}

#[test]
fn oversized_inputs_are_refused_at_bind() {
    let mut limits = Limits::default();
    limits.max_input_nodes = 100;
    let engine = Engine::new(limits);
    let e = engine
        .bind(Some(&json!({"items": (0..1000).collect::<Vec<i64>>()})))
        .err()
        .expect("too big");
    assert_eq!(e.kind, ExpressionErrorKind::Limit);
    assert_eq!(e.message, "input has more than 100 values");
}

#[test]
fn the_deadline_stops_a_batch() {
    let mut limits = Limits::default();
    limits.deadline = Duration::ZERO;
    let engine = Engine::new(limits);
    let bound = engine.bind(None).expect("bind");
    std::thread::sleep(Duration::from_millis(1));
    let e = bound
        .evaluate(ExpressionKind::ClusterSelector, "true", &cluster())
        .unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Timeout);
}

#[test]
fn runtime_errors_and_wrong_result_shapes_are_errors() {
    let engine = Engine::default();
    let e = eval(&engine, ExpressionKind::Value, "object.spec.nosuch + 1").unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Runtime);
    // `dyn` passes the checker; the result is checked when it arrives.
    let e = eval(
        &engine,
        ExpressionKind::ClusterSelector,
        "object.spec.replicas",
    )
    .unwrap_err();
    assert_eq!(e.kind, ExpressionErrorKind::Runtime);
    assert!(e.message.contains("want bool"), "{}", e.message);
}

#[test]
fn programs_are_cached_by_text_and_the_cache_is_bounded() {
    let mut limits = Limits::default();
    limits.program_cache = 2;
    let engine = Engine::new(limits);
    for i in 0..5 {
        engine.compile(&format!("{i} + 1")).expect("compile");
        engine.compile(&format!("{i} + 1")).expect("hit");
    }
    assert_eq!(engine.cached_programs(), 2);
}

#[test]
fn a_bound_object_serves_many_clusters_and_expressions() {
    let engine = Engine::default();
    let object = deployment();
    let bound = engine.bind(Some(&object)).expect("bind");
    let mut c2 = cluster();
    c2.metadata.name = Some("us-1".into());
    c2.spec.region = "us-east".into();
    let got: Vec<Value> = [cluster(), c2]
        .iter()
        .map(|c| {
            bound
                .evaluate(
                    ExpressionKind::Value,
                    "clusterName + ':' + cluster.spec.region + ':' + object.metadata.name",
                    c,
                )
                .expect("eval")
        })
        .collect();
    assert_eq!(
        got,
        vec![json!("eu-1:eu-west:web"), json!("us-1:us-east:web")]
    );
}
