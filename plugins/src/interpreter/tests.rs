use std::collections::BTreeSet;

use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::interpreter::{Interpreters, Operation};
use serde_json::{Value, json};

use super::*;

fn chain_native() -> Interpreters {
    chain(Vec::new(), Vec::new())
}

fn item(cluster: &str, status: Option<Value>) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        status,
        applied: true,
        ..Default::default()
    }
}

fn deploy() -> Value {
    json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","generation":4},
        "spec":{"replicas":3,"template":{"spec":{"containers":[
            {"name":"c","image":"web","resources":{"requests":{"cpu":"250m","memory":"64Mi"}}},
            {"name":"d","image":"x","resources":{"limits":{"cpu":"1"}}}]}}}})
}

#[test]
fn workload_replicas_and_requirements_follow_the_pod_template() {
    let c = chain_native();
    let r = c.get_replicas(&deploy()).unwrap();
    assert_eq!(r.replicas, 3);
    let req = r.requirements.unwrap();
    assert_eq!(req.resource_request["cpu"].as_text(), "1250m");
    assert_eq!(req.resource_request["memory"].as_text(), "64Mi");
    // Karmada fills these only under the alpha ResourceQuotaEstimate gate.
    assert!(req.namespace.is_empty() && req.priority_class_name.is_empty());

    let job = json!({"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"parallelism":5,"completions":2,"template":{"spec":{"containers":[]}}}});
    let r = c.get_replicas(&job).unwrap();
    assert_eq!((r.replicas, r.requirements), (2, None));
    let pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"zone":"a"},"containers":[]}});
    let r = c.get_replicas(&pod).unwrap();
    assert_eq!(r.replicas, 1);
    assert_eq!(
        r.requirements.unwrap().node_claim,
        Some(json!({"nodeSelector":{"zone":"a"}}))
    );
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}});
    assert!(c.resolve(&cm, Operation::InterpretReplica).is_none());
    assert_eq!(c.get_replicas(&cm).unwrap().replicas, 0);
    let bad = json!({"apiVersion":"apps/v1","kind":"StatefulSet","spec":{"replicas":"three"}});
    assert!(
        c.get_replicas(&bad)
            .unwrap_err()
            .to_string()
            .contains("spec.replicas")
    );
}

#[test]
fn detector_builds_the_binding_through_the_chain() {
    use flotilla_api::Object;
    use flotilla_api::policy::{PropagationPolicy, PropagationSpec, ResourceSelector};
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion":"policy.karmada.io/v1alpha1","kind":"PropagationPolicy",
        "metadata":{"name":"p","namespace":"shop"},
        "spec":{"resourceSelectors":[{"apiVersion":"apps/v1","kind":"Deployment"}]}}))
    .unwrap();
    let _ = (PropagationSpec::default(), ResourceSelector::default());
    let t = Object(deploy());
    let pps = [policy];
    let claim = flotilla_core::detector::claim(&t, &pps, &[]).unwrap();
    let gates = flotilla_core::priority::FeatureGates::default();
    let rb = flotilla_core::detector::build_binding(&t, claim, &chain_native(), gates).unwrap();
    assert_eq!(rb.spec.replicas, 3);
    let rr = rb.spec.replica_requirements.unwrap();
    assert_eq!(rr.resource_request["cpu"].as_text(), "1250m");
    assert_eq!(
        (rr.namespace.as_str(), rr.priority_class_name.as_str()),
        ("", "")
    );
    // Under ResourceQuotaEstimate: the template's namespace and the pod's priority class.
    let mut with_class = deploy();
    with_class["spec"]["template"]["spec"]["priorityClassName"] = json!("batch");
    let t = Object(with_class);
    let quota = flotilla_core::priority::FeatureGates {
        resource_quota_estimate: true,
        ..gates
    };
    let rr = flotilla_core::detector::build_binding(&t, claim, &chain_native(), quota)
        .unwrap()
        .spec
        .replica_requirements
        .unwrap();
    assert_eq!(
        (rr.namespace.as_str(), rr.priority_class_name.as_str()),
        (t.namespace(), "batch")
    );
    assert!(!t.namespace().is_empty());
}

#[test]
fn revise_replica_sets_replicas_or_parallelism_and_rejects_non_integers() {
    let c = chain_native();
    let revised = c.revise_replica(&deploy(), 2).unwrap();
    assert_eq!(revised["spec"]["replicas"], 2);
    let job = json!({"apiVersion":"batch/v1","kind":"Job","spec":{"parallelism":4}});
    assert_eq!(c.revise_replica(&job, 1).unwrap()["spec"]["parallelism"], 1);
    let bad = json!({"apiVersion":"apps/v1","kind":"ReplicaSet","spec":{"replicas":[1]}});
    assert!(c.revise_replica(&bad, 1).is_err());
    let pod = json!({"apiVersion":"v1","kind":"Pod","spec":{}});
    assert!(c.resolve(&pod, Operation::ReviseReplica).is_none());
}

#[test]
fn retain_keeps_what_the_member_assigns() {
    let c = chain_native();
    let svc = json!({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}});
    let live = json!({"apiVersion":"v1","kind":"Service","spec":{"clusterIP":"10.0.0.9","healthCheckNodePort":31000}});
    let r = c.retain(&svc, &live).unwrap();
    assert_eq!(r["spec"]["clusterIP"], "10.0.0.9");
    assert_eq!(r["spec"]["healthCheckNodePort"], 31000);

    let mut d = deploy();
    let live = json!({"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":7}});
    assert_eq!(c.retain(&d, &live).unwrap()["spec"]["replicas"], 3);
    d["metadata"]["labels"] = json!({"resourcetemplate.karmada.io/retain-replicas": "true"});
    assert_eq!(c.retain(&d, &live).unwrap()["spec"]["replicas"], 7);
    assert!(c.retain(&d, &json!({"spec":{}})).is_err());

    let sa = json!({"apiVersion":"v1","kind":"ServiceAccount","secrets":[{"name":"a"}]});
    let live = json!({"secrets":[{"name":"a"},{"name":"token-x"}]});
    assert_eq!(
        c.retain(&sa, &live).unwrap()["secrets"],
        json!([{"name":"a"},{"name":"token-x"}])
    );

    let pod = json!({"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","volumeMounts":[{"name":"x"}]}]}});
    let live = json!({"spec":{"nodeName":"n1","containers":[{"name":"c","volumeMounts":[{"name":"token"}]}]}});
    let r = c.retain(&pod, &live).unwrap();
    assert_eq!(r["spec"]["nodeName"], "n1");
    assert_eq!(
        r["spec"]["containers"][0]["volumeMounts"],
        json!([{"name":"token"}])
    );

    let job = json!({"apiVersion":"batch/v1","kind":"Job","spec":{"template":{"spec":{}}}});
    let live = json!({"spec":{"selector":{"matchLabels":{"controller-uid":"u"}},"template":{"metadata":{"labels":{"controller-uid":"u"}}}}});
    let r = c.retain(&job, &live).unwrap();
    assert_eq!(r["spec"]["selector"]["matchLabels"]["controller-uid"], "u");
    assert_eq!(
        r["spec"]["template"]["metadata"]["labels"]["controller-uid"],
        "u"
    );

    let pvc = json!({"apiVersion":"v1","kind":"PersistentVolumeClaim","spec":{}});
    let r = c
        .retain(&pvc, &json!({"spec":{"volumeName":"pv-1"}}))
        .unwrap();
    assert_eq!(r["spec"]["volumeName"], "pv-1");

    let token =
        json!({"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/service-account-token"});
    let r = c.retain(&token, &json!({"data":{"token":"dA=="}})).unwrap();
    assert_eq!(r["data"]["token"], "dA==");

    // Kinds nobody retains for are sent as rendered.
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap","data":{"a":"1"}});
    assert_eq!(c.retain(&cm, &json!({"data":{"b":"2"}})).unwrap(), cm);
}

fn member_deploy(generation: i64, template_generation: &str, status: Value) -> Value {
    json!({"apiVersion":"apps/v1","kind":"Deployment",
        "metadata":{"name":"web","generation":generation,"annotations":{"resourcetemplate.karmada.io/generation":template_generation}},
        "spec":{"replicas":2},"status":status})
}

#[test]
fn deployment_status_is_reflected_with_its_generations() {
    let c = chain_native();
    let m = member_deploy(
        2,
        "4",
        json!({"observedGeneration":2,"replicas":2,"readyReplicas":2,"availableReplicas":2,"updatedReplicas":2,"conditions":[{"type":"Available"}]}),
    );
    assert_eq!(
        c.reflect_status(&m).unwrap(),
        Some(
            json!({"generation":2,"resourceTemplateGeneration":4,"observedGeneration":2,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2})
        )
    );
    let unstamped = member_deploy(2, "", json!({"replicas":1}));
    assert!(c.reflect_status(&unstamped).is_err());
    let no_status = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{}});
    assert_eq!(c.reflect_status(&no_status).unwrap(), None);
    // Other kinds: the whole status; ClusterIP Services: nothing.
    let cm = json!({"apiVersion":"x/v1","kind":"Thing","status":{"a":[1]}});
    assert_eq!(c.reflect_status(&cm).unwrap(), Some(json!({"a":[1]})));
    let svc = json!({"apiVersion":"v1","kind":"Service","spec":{"type":"ClusterIP"},"status":{"loadBalancer":{}}});
    assert_eq!(c.reflect_status(&svc).unwrap(), None);
    let hpa = json!({"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","status":{"currentReplicas":0,"desiredReplicas":0,"conditions":[]}});
    assert_eq!(
        c.reflect_status(&hpa).unwrap(),
        Some(json!({"desiredReplicas":0}))
    );
}

#[test]
fn health_follows_karmadas_rules_per_kind() {
    let c = chain_native();
    let healthy = member_deploy(
        3,
        "1",
        json!({"observedGeneration":3,"updatedReplicas":2,"availableReplicas":2}),
    );
    assert_eq!(c.interpret_health(&healthy).unwrap(), Some(true));
    let stale = member_deploy(
        3,
        "1",
        json!({"observedGeneration":2,"updatedReplicas":2,"availableReplicas":2}),
    );
    assert_eq!(c.interpret_health(&stale).unwrap(), Some(false));
    let broken = member_deploy(
        3,
        "1",
        json!({"observedGeneration":3,"updatedReplicas":2,"availableReplicas":0}),
    );
    assert_eq!(c.interpret_health(&broken).unwrap(), Some(false));
    let lb = json!({"apiVersion":"v1","kind":"Service","spec":{"type":"LoadBalancer"},"status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}}});
    assert_eq!(c.interpret_health(&lb).unwrap(), Some(true));
    let pending =
        json!({"apiVersion":"v1","kind":"Service","spec":{"type":"LoadBalancer"},"status":{}});
    assert_eq!(c.interpret_health(&pending).unwrap(), Some(false));
    let pod = json!({"apiVersion":"v1","kind":"Pod","status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}});
    assert_eq!(c.interpret_health(&pod).unwrap(), Some(true));
    let pvc =
        json!({"apiVersion":"v1","kind":"PersistentVolumeClaim","status":{"phase":"Pending"}});
    assert_eq!(c.interpret_health(&pvc).unwrap(), Some(false));
    let pdb = json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget","status":{"currentHealthy":2,"desiredHealthy":2}});
    assert_eq!(c.interpret_health(&pdb).unwrap(), Some(true));
    let ds = json!({"apiVersion":"apps/v1","kind":"DaemonSet","status":{"desiredNumberScheduled":3,"updatedNumberScheduled":2}});
    assert_eq!(c.interpret_health(&ds).unwrap(), Some(false));
    // No native health for ConfigMaps.
    let cm = json!({"apiVersion":"v1","kind":"ConfigMap"});
    assert_eq!(c.interpret_health(&cm).unwrap(), None);
}

#[test]
fn deployment_aggregation_sums_members_and_adds_the_conditions() {
    let c = chain_native();
    let member = |avail: i64| {
        json!({"generation":1,"resourceTemplateGeneration":4,"observedGeneration":1,
               "replicas":2,"updatedReplicas":2,"readyReplicas":avail,"availableReplicas":avail})
    };
    let items = [item("m1", Some(member(2))), item("m2", Some(member(1)))];
    let out = c.aggregate_status(&deploy(), &items).unwrap();
    let s = &out["status"];
    assert_eq!(s["replicas"], 4);
    assert_eq!(s["availableReplicas"], 3);
    assert_eq!(s["observedGeneration"], 4);
    let conds: Vec<(String, String)> = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().into(),
                c["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        conds,
        vec![
            ("Available".into(), "MinimumReplicasAvailable".into()),
            ("Progressing".into(), "ReplicaSetUpdated".into())
        ]
    );
    // Idempotent: aggregating again changes nothing.
    assert_eq!(c.aggregate_status(&out, &items).unwrap(), out);
    // A member that has not caught up keeps the old observedGeneration.
    let mut lagging = member(2);
    lagging["resourceTemplateGeneration"] = json!(3);
    let out2 = c
        .aggregate_status(&deploy(), &[item("m1", Some(lagging)), item("m2", None)])
        .unwrap();
    assert!(out2["status"].get("observedGeneration").is_none());
}

#[test]
fn deployment_conditions_summarise_the_members() {
    let template = deploy();
    let targets = BTreeSet::from(["m1", "m2"]);
    assert!(deployment_conditions(&template, &targets, &[item("m1", None)]).is_none());
    let done =
        json!({"observedGeneration":1,"replicas":2,"updatedReplicas":2,"availableReplicas":2});
    let both = [item("m1", Some(done.clone())), item("m2", Some(done))];
    let [a, p] = deployment_conditions(&template, &targets, &both).unwrap();
    assert_eq!((a.1, p.2.as_str()), ("True", "NewReplicaSetAvailable"));
    let stalled = json!({"availableReplicas":0,"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"late"}]});
    let [a, p] = deployment_conditions(&template, &targets, &[item("m1", Some(stalled))]).unwrap();
    assert_eq!(
        (a.1, p.1, p.3.as_str()),
        ("False", "False", "member cluster m1: late")
    );
    assert_eq!(max_unavailable(&template), 0);
    let big = json!({"spec":{"replicas":8}});
    assert_eq!(max_unavailable(&big), 2);
}

#[test]
fn other_kinds_aggregate_as_karmada_does() {
    let c = chain_native();
    let svc = json!({"apiVersion":"v1","kind":"Service","spec":{"type":"LoadBalancer"}});
    let lb = |v: Value| Some(json!({"loadBalancer":{"ingress":v}}));
    let out = c
        .aggregate_status(
            &svc,
            &[
                item(
                    "m1",
                    lb(json!([{"ip":"10.0.0.2"},{"hostname":"b.example"}])),
                ),
                item("m2", lb(json!([{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}]))),
            ],
        )
        .unwrap();
    assert_eq!(
        out["status"]["loadBalancer"]["ingress"],
        json!([{"hostname":"b.example"},{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}])
    );

    let pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}});
    let out = c
        .aggregate_status(
            &pod,
            &[
                item("m1", Some(json!({"phase":"Running"}))),
                item("m2", None),
            ],
        )
        .unwrap();
    assert_eq!(out["status"]["phase"], "Pending");

    let pvc = json!({"apiVersion":"v1","kind":"PersistentVolumeClaim"});
    let out = c
        .aggregate_status(
            &pvc,
            &[
                item("m1", Some(json!({"phase":"Bound"}))),
                item("m2", Some(json!({"phase":"Lost"}))),
            ],
        )
        .unwrap();
    assert_eq!(out["status"], json!({"phase":"Lost"}));

    let job = json!({"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"}});
    let done = json!({"succeeded":1,"startTime":"2026-01-01T00:00:05Z","completionTime":"2026-01-01T00:01:00Z",
        "conditions":[{"type":"Complete","status":"True"}]});
    let mut earlier = done.clone();
    earlier["startTime"] = json!("2026-01-01T00:00:01Z");
    let out = c
        .aggregate_status(&job, &[item("m1", Some(done)), item("m2", Some(earlier))])
        .unwrap();
    assert_eq!(out["status"]["succeeded"], 2);
    assert_eq!(out["status"]["startTime"], "2026-01-01T00:00:01Z");
    assert_eq!(out["status"]["completionTime"], "2026-01-01T00:01:00Z");
    assert_eq!(out["status"]["conditions"][0]["type"], "Complete");
    // A finished Job is not aggregated again.
    assert_eq!(c.aggregate_status(&out, &[]).unwrap(), out);

    let pdb = json!({"apiVersion":"policy/v1","kind":"PodDisruptionBudget"});
    let member = json!({"currentHealthy":2,"desiredHealthy":1,"disruptionsAllowed":1,"expectedPods":2,"disruptedPods":{"p1":"2026-01-01T00:00:00Z"}});
    let out = c
        .aggregate_status(
            &pdb,
            &[item("m1", Some(member.clone())), item("m2", Some(member))],
        )
        .unwrap();
    assert_eq!(out["status"]["currentHealthy"], 4);
    assert_eq!(out["status"]["disruptedPods"].as_object().unwrap().len(), 2);
    assert!(out["status"]["disruptedPods"].get("m2/p1").is_some());

    let cron = json!({"apiVersion":"batch/v1","kind":"CronJob","status":{}});
    let out = c
        .aggregate_status(
            &cron,
            &[
                item(
                    "m1",
                    Some(
                        json!({"lastScheduleTime":"2026-01-01T00:00:00Z","active":[{"name":"a"}]}),
                    ),
                ),
                item(
                    "m2",
                    Some(json!({"lastScheduleTime":"2026-01-02T00:00:00Z"})),
                ),
            ],
        )
        .unwrap();
    assert_eq!(out["status"]["lastScheduleTime"], "2026-01-02T00:00:00Z");
    assert_eq!(out["status"]["active"], json!([{"name":"a"}]));

    let cm = json!({"apiVersion":"v1","kind":"ConfigMap"});
    assert!(c.resolve(&cm, Operation::AggregateStatus).is_none());
}

#[test]
fn dependencies_of_pod_templates_ingresses_and_service_imports() {
    let c = chain_native();
    let d = json!({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db","namespace":"shop"},
        "spec":{"volumeClaimTemplates":[{"metadata":{"name":"data"}}],"template":{"spec":{
            "serviceAccountName":"db-sa","imagePullSecrets":[{"name":"pull"}],
            "containers":[{"name":"c","envFrom":[{"configMapRef":{"name":"env"}}],
                "env":[{"name":"P","valueFrom":{"secretKeyRef":{"name":"pw","key":"k"}}}]}],
            "volumes":[{"name":"v","configMap":{"name":"files"}},{"name":"data","persistentVolumeClaim":{"claimName":"data"}},
                       {"name":"logs","persistentVolumeClaim":{"claimName":"logs"}},{"name":"p","projected":{"sources":[{"secret":{"name":"proj"}}]}}]}}}});
    let deps: Vec<(String, String)> = c
        .get_dependencies(&d)
        .unwrap()
        .into_iter()
        .map(|d| {
            assert_eq!(d.namespace, "shop");
            (d.kind, d.name)
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("ConfigMap", "env"),
        ("ConfigMap", "files"),
        ("Secret", "proj"),
        ("Secret", "pull"),
        ("Secret", "pw"),
        ("ServiceAccount", "db-sa"),
        ("PersistentVolumeClaim", "logs"),
    ]
    .iter()
    .map(|(k, n)| ((*k).into(), (*n).into()))
    .collect();
    assert_eq!(deps, want);

    let ing = json!({"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"namespace":"shop"},"spec":{"tls":[{"secretName":"cert"}]}});
    assert_eq!(c.get_dependencies(&ing).unwrap()[0].name, "cert");
    let nameless = json!({"apiVersion":"networking.k8s.io/v1","kind":"Ingress","spec":{"tls":[{"hosts":["a"]}]}});
    assert!(c.get_dependencies(&nameless).is_err());

    let si = json!({"apiVersion":"multicluster.x-k8s.io/v1alpha1","kind":"ServiceImport","metadata":{"name":"api","namespace":"shop"}});
    let deps = c.get_dependencies(&si).unwrap();
    assert_eq!(deps[0].name, "derived-api");
    assert_eq!(
        deps[1].label_selector.as_ref().unwrap().match_labels["kubernetes.io/service-name"],
        "derived-api"
    );
}

#[test]
fn customizations_come_first_sorted_by_name_and_broken_ones_are_reported() {
    use flotilla_api::interpreter::{CustomizationRule, CustomizationTarget};
    struct Fixed(i32);
    impl ResourceInterpreter for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }
        fn hook_enabled(&self, _: &str, _: &str, op: Operation) -> bool {
            op == Operation::InterpretReplica
        }
        fn get_replicas(&self, _: &Value) -> Result<Replicas, PluginError> {
            Ok(Replicas {
                replicas: self.0,
                requirements: None,
            })
        }
    }
    struct Backend;
    impl RuleBackend for Backend {
        fn field(&self) -> &'static str {
            "cel"
        }
        fn compile(
            &self,
            _: &str,
            _: &CustomizationTarget,
            _: Operation,
            rule: &CustomizationRule,
        ) -> Result<Arc<dyn ResourceInterpreter>, String> {
            let n = rule
                .cel
                .as_ref()
                .and_then(|m| m.get("replicas"))
                .and_then(Value::as_i64);
            n.map(|n| Arc::new(Fixed(i32::try_from(n).unwrap_or(0))) as Arc<_>)
                .ok_or_else(|| "replicas: not a number".into())
        }
    }
    let ric = |name: &str, n: Value| -> ResourceInterpreterCustomization {
        serde_json::from_value(json!({"metadata":{"name":name},"spec":{"target":{"apiVersion":"apps/v1","kind":"Deployment"},
            "customizations":{"replicaResource":{"cel":{"replicas":n}}}}}))
        .unwrap()
    };
    let rics = [ric("b", json!(9)), ric("a", json!(5)), ric("c", json!("x"))];
    let backends: Vec<Arc<dyn RuleBackend>> = vec![Arc::new(Backend)];
    let (compiled, failed) = compile_customizations(&rics, &backends);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "c");
    assert!(failed[0].1.contains("spec.customizations.replicaResource"));
    let c = chain(compiled, Vec::new());
    assert_eq!(
        c.get_replicas(&deploy()).unwrap().replicas,
        5,
        "a sorts first"
    );
    // Operations the customization leaves alone still reach the native interpreter.
    assert_eq!(
        c.revise_replica(&deploy(), 1).unwrap()["spec"]["replicas"],
        1
    );
}
