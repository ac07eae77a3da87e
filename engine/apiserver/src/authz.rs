//! Authorization: what a request asks to do ([`RequestInfo`], as kube-apiserver's RequestInfo
//! reads it from the method and path) and whether the caller may ([`Authorizer`], RBAC over the
//! stored `rbac.authorization.k8s.io/v1` objects).
//!
//! **Who bypasses RBAC.** Members of `system:masters` (the generated admin token) and, when the
//! server runs with anonymous access (`--insecure-loopback-anonymous`), `system:anonymous`: in
//! that mode every request is allowed, as before RBAC existed here.
//!
//! **Default grants.** kube-apiserver bootstraps the ClusterRoles `system:discovery` and
//! `system:basic-user`, bound to `system:authenticated` (and `system:public-info-viewer`, whose
//! paths `system:discovery` covers, for unauthenticated callers too). They are stored with the
//! rest of the bootstrap policy ([`crate::bootstrap`]) and also hard-coded here
//! ([`DEFAULT_GRANTS`]), so they hold even before the policy is stored or when a user deletes
//! the stored objects (kube-apiserver restores them at its next start): every authenticated
//! user may read discovery (`/api`,
//! `/apis`, …), `/version`, the health endpoints and `/openapi`, and may create the self-reviews
//! (`kubectl auth whoami` / `can-i`). Unauthenticated callers get none of them: outside anonymous
//! mode there are none, and in it they may do everything.
//!
//! **Logical clusters.** A request under `/clusters/<name>/` (a simulated member) is authorized
//! as the same request without the prefix, against the Roles and bindings of the root keyspace:
//! a RoleBinding in namespace `team-a` grants the same access to `team-a` in every member, and
//! bindings stored inside a member's keyspace grant nothing. The members are simulations inside
//! one process run by one operator, so one policy for all of them is the simple, predictable
//! choice; per-member policy would need per-member bindings that nothing creates today.
//!
//! **Aggregation.** No aggregation controller runs, so an aggregated ClusterRole
//! (`aggregationRule`, as kube's `view`/`edit`/`admin`) has, when evaluated, the rules of the
//! ClusterRoles its selectors match, and those of the aggregated roles they match in turn (the
//! fixed point the controller reaches). The bootstrap policy ([`crate::bootstrap`]) stores the
//! default roles.
//!
//! **Impersonation.** `Impersonate-User` / `-Group` / `-Uid` / `-Extra-*` (`kubectl --as`)
//! switch to the named user when the caller may `impersonate` it ([`Authorizer::impersonate`]).
//!
//! **Evaluation.** Bindings and roles are read from the store at request time (no cache, so a
//! change applies to the next request). Only callers outside `system:masters` pay for it.

use axum::http::{HeaderMap, HeaderValue, Method};
use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::store::Store;

/// The keyspace whose RBAC objects are evaluated (the root logical cluster).
const ROOT: &str = crate::server::ROOT_CLUSTER;
const RBAC: &str = "rbac.authorization.k8s.io";

/// The attributes of a request that authorization looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether this is a request for an API resource (else for a path such as `/version`).
    pub resource_request: bool,
    /// The request path, without a `/clusters/<name>` prefix.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`; for a
    /// non-resource request the lower-cased HTTP method.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`status`, `scale`, `proxy`, …).
    pub subresource: String,
    /// The namespace (`""` when cluster-scoped or across namespaces).
    pub namespace: String,
    /// The object's name (`""` for collections, unless a `metadata.name` field selector names one).
    pub name: String,
    /// The resource was named under `namespaces/<ns>/` (`namespace` is then its scope; for
    /// `namespaces/<ns>` itself, as kube, `namespace` is set without this).
    pub(crate) scoped: bool,
    /// Path segments from the resource on (`resource/name/subresource` is 3; the server serves
    /// no more).
    pub(crate) parts: usize,
}

impl RequestInfo {
    /// Read the attributes of a request from its method, path and query string.
    ///
    /// A `/clusters/<name>` prefix is dropped ([module docs](self)). As kube-apiserver: paths
    /// under `/api/<version>/…` and `/apis/<group>/<version>/…` are resource requests;
    /// everything else (`/api`, `/apis/<group>`, `/version`, …) is not. `GET` of a collection is
    /// `list`, or `watch` with `watch=true` (also on a named object, which this server serves as
    /// a watch), and a `metadata.name=` field selector names the object; `DELETE` of a
    /// collection is `deletecollection`.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Self {
        let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segs.first() == Some(&"clusters") && segs.len() >= 2 {
            segs.drain(..2);
        }
        let mut info = Self::from_segments(method, &segs, query);
        if path.ends_with('/') && !segs.is_empty() {
            info.path.push('/');
        }
        info
    }

    /// [`RequestInfo::parse`] of a path's non-empty segments, without a logical-cluster prefix.
    /// The server routes by this too ([`crate::server`]), so what is authorized is what is
    /// served.
    pub(crate) fn from_segments(method: &Method, segs: &[&str], query: Option<&str>) -> Self {
        let mut info = RequestInfo {
            path: format!("/{}", segs.join("/")),
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let rest: &[&str] = match segs {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                info.version = (*version).to_owned();
                rest
            }
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                info.group = (*group).to_owned();
                info.version = (*version).to_owned();
                rest
            }
            _ => return info,
        };
        info.resource_request = true;
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_owned();
        let parts: &[&str] = match rest {
            ["namespaces", ns, more @ ..] => {
                info.namespace = (*ns).to_owned();
                match more.first() {
                    Some(&("status" | "finalize")) | None => rest,
                    Some(_) => {
                        info.scoped = true;
                        more
                    }
                }
            }
            _ => rest,
        };
        info.parts = parts.len();
        info.resource = parts.first().copied().unwrap_or_default().to_owned();
        info.name = parts.get(1).copied().unwrap_or_default().to_owned();
        info.subresource = parts.get(2).copied().unwrap_or_default().to_owned();
        let query = crate::server::Query::parse(query);
        if info.verb == "get" && (info.name.is_empty() || query.flag("watch")) {
            info.verb = if query.flag("watch") { "watch" } else { "list" }.to_owned();
            if info.name.is_empty()
                && let Some(name) = query.get("fieldSelector").and_then(selected_name)
            {
                info.name = name;
            }
        }
        if info.verb == "delete" && info.name.is_empty() {
            info.verb = "deletecollection".to_owned();
        }
        info
    }

    /// The attributes a `SelfSubjectAccessReview`'s spec asks about (`None` when it has neither
    /// `resourceAttributes` nor `nonResourceAttributes`).
    pub fn from_review(spec: &Value) -> Option<Self> {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
            return Some(RequestInfo {
                resource_request: true,
                verb: text(ra, "verb"),
                group: text(ra, "group"),
                version: text(ra, "version"),
                resource: text(ra, "resource"),
                subresource: text(ra, "subresource"),
                namespace: text(ra, "namespace"),
                name: text(ra, "name"),
                ..RequestInfo::default()
            });
        }
        let nra = spec
            .get("nonResourceAttributes")
            .filter(|v| v.is_object())?;
        Some(RequestInfo {
            verb: text(nra, "verb"),
            path: text(nra, "path"),
            ..RequestInfo::default()
        })
    }
}

/// The name an exact `metadata.name=` (or `==`) requirement of a field selector names.
fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (field, value) = term
            .split_once("==")
            .or_else(|| term.split_once('='))
            .filter(|(f, _)| !f.ends_with('!'))?;
        (field.trim() == "metadata.name" && !value.is_empty() && !value.contains('/'))
            .then(|| value.trim().to_owned())
    })
}

/// One RBAC `PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// Verbs (`*`: all).
    pub verbs: Vec<String>,
    /// API groups (`*`: all).
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource`, `*/subresource` or `*`.
    pub resources: Vec<String>,
    /// Object names (empty: all).
    pub resource_names: Vec<String>,
    /// Non-resource paths; a trailing `*` matches any suffix.
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    fn from_json(v: &Value) -> Self {
        let list = |k: &str| -> Vec<String> {
            v.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Rule {
            verbs: list("verbs"),
            api_groups: list("apiGroups"),
            resources: list("resources"),
            resource_names: list("resourceNames"),
            non_resource_urls: list("nonResourceURLs"),
        }
    }

    fn to_json(&self) -> Value {
        let mut out = json!({"verbs": self.verbs});
        if self.non_resource_urls.is_empty() {
            out["apiGroups"] = json!(self.api_groups);
            out["resources"] = json!(self.resources);
            if !self.resource_names.is_empty() {
                out["resourceNames"] = json!(self.resource_names);
            }
        } else {
            out["nonResourceURLs"] = json!(self.non_resource_urls);
        }
        out
    }

    /// This rule split into rules of one verb and one group and resource (names kept together)
    /// or one verb and one path.
    fn breakdown(&self) -> Vec<Rule> {
        let mut out = Vec::new();
        for verb in &self.verbs {
            for group in &self.api_groups {
                for resource in &self.resources {
                    out.push(Rule {
                        verbs: vec![verb.clone()],
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        resource_names: self.resource_names.clone(),
                        non_resource_urls: Vec::new(),
                    });
                }
            }
            for url in &self.non_resource_urls {
                out.push(Rule {
                    verbs: vec![verb.clone()],
                    non_resource_urls: vec![url.clone()],
                    ..Rule::default()
                });
            }
        }
        out
    }

    /// Whether this rule grants everything the simple rule `s` ([`Rule::breakdown`]) does.
    fn covers(&self, s: &Rule) -> bool {
        let all_in = |set: &[String], wanted: &[String]| {
            set.iter().any(|x| x == "*") || wanted.iter().all(|w| set.contains(w))
        };
        if !all_in(&self.verbs, &s.verbs) {
            return false;
        }
        if !s.non_resource_urls.is_empty() {
            return s.non_resource_urls.iter().all(|u| {
                self.non_resource_urls.iter().any(|h| {
                    h == "*" || h == u || h.strip_suffix('*').is_some_and(|p| u.starts_with(p))
                })
            });
        }
        if !all_in(&self.api_groups, &s.api_groups) {
            return false;
        }
        let resources = self.resources.iter().any(|r| r == "*")
            || s.resources.iter().all(|r| {
                self.resources.contains(r)
                    || r.split_once('/')
                        .is_some_and(|(_, sub)| self.resources.contains(&format!("*/{sub}")))
            });
        resources
            && (self.resource_names.is_empty()
                || (!s.resource_names.is_empty()
                    && s.resource_names
                        .iter()
                        .all(|n| self.resource_names.contains(n))))
    }

    /// Go's `%q` lists, as kube-apiserver prints a rule not held.
    fn compact(&self) -> String {
        let q = |v: &[String]| {
            v.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !self.non_resource_urls.is_empty() {
            return format!(
                "{{NonResourceURLs:[{}], Verbs:[{}]}}",
                q(&self.non_resource_urls),
                q(&self.verbs)
            );
        }
        let names = if self.resource_names.is_empty() {
            String::new()
        } else {
            format!(", ResourceNames:[{}]", q(&self.resource_names))
        };
        format!(
            "{{APIGroups:[{}], Resources:[{}]{names}, Verbs:[{}]}}",
            q(&self.api_groups),
            q(&self.resources),
            q(&self.verbs)
        )
    }

    /// Whether this rule allows the request `a`.
    pub fn allows(&self, a: &RequestInfo) -> bool {
        let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        if !has(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self.non_resource_urls.iter().any(|u| {
                u == "*"
                    || *u == a.path
                    || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p))
            });
        }
        if !has(&self.api_groups, &a.group) {
            return false;
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        let resource = self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!a.subresource.is_empty()
                    && r.strip_prefix("*/") == Some(a.subresource.as_str()))
        });
        resource && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }
}

/// The grants kube-apiserver bootstraps for `system:authenticated` (`system:discovery`,
/// `system:basic-user`), hard-coded: (ClusterRole, verbs, apiGroups, resources,
/// nonResourceURLs).
type Grant = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);
pub const DEFAULT_GRANTS: &[Grant] = &[
    (
        "system:discovery",
        &["get"],
        &[],
        &[],
        &[
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/healthz",
            "/livez",
            "/openapi",
            "/openapi/*",
            "/readyz",
            "/version",
            "/version/",
        ],
    ),
    (
        "system:basic-user",
        &["create"],
        &["authorization.k8s.io"],
        &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        &[],
    ),
    (
        "system:basic-user",
        &["create"],
        &["authentication.k8s.io"],
        &["selfsubjectreviews"],
        &[],
    ),
];

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|&x| x.to_owned()).collect()
}

/// The decision on one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// Why (which binding allowed it), as kube-apiserver's RBAC words it; empty when denied.
    pub reason: String,
}

/// RBAC over a store's Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.
#[derive(Debug, Clone, Copy)]
pub struct Authorizer<'a> {
    store: &'a Store,
    anonymous: bool,
}

impl<'a> Authorizer<'a> {
    /// An authorizer over `store`; `anonymous`: the server accepts anonymous requests, and
    /// allows `system:anonymous` everything.
    pub fn new(store: &'a Store, anonymous: bool) -> Self {
        Authorizer { store, anonymous }
    }

    /// Whether `user` bypasses RBAC ([module docs](self)).
    pub fn unrestricted(&self, user: &UserInfo) -> bool {
        user.groups.iter().any(|g| g == "system:masters")
            || (self.anonymous && user.name == crate::auth::ANONYMOUS_USER)
    }

    /// Whether `user` may do `a`.
    ///
    /// # Errors
    /// Fails (500) when the store cannot be read.
    pub fn authorize(&self, user: &UserInfo, a: &RequestInfo) -> Result<Decision, ApiError> {
        if self.unrestricted(user) {
            return Ok(Decision {
                allowed: true,
                reason: String::new(),
            });
        }
        let mut reason = None;
        self.visit(user, &a.namespace, &mut |source, rule| {
            if rule.allows(a) {
                reason = Some(format!("RBAC: allowed by {source}"));
                false
            } else {
                true
            }
        })?;
        Ok(Decision {
            allowed: reason.is_some(),
            reason: reason.unwrap_or_default(),
        })
    }

    /// The user to act as: the one the `Impersonate-User` / `-Group` / `-Uid` / `-Extra-*`
    /// headers name (`kubectl --as`, `--as-group`), when `user` may `impersonate` each of them
    /// (resources `users`, `groups`, `serviceaccounts` in the core group; `uids` and
    /// `userextras/<key>` in `authentication.k8s.io`), else `user` itself. As kube-apiserver:
    /// an impersonated user other than `system:anonymous` is in `system:authenticated`, a
    /// ServiceAccount also in `system:serviceaccounts` and `system:serviceaccounts:<ns>`; extra
    /// fields are checked and then dropped (this server keeps none).
    ///
    /// # Errors
    /// 403 (kube-apiserver's wording) when an impersonation is not allowed; 400 for groups, uid
    /// or extras without a user, or header values that are not text.
    pub fn impersonate(&self, user: UserInfo, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let text = |v: &HeaderValue| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::bad_request("an Impersonate-* header is not valid text"))
        };
        let name = headers.get("impersonate-user").map(text).transpose()?;
        let groups = headers
            .get_all("impersonate-group")
            .iter()
            .map(text)
            .collect::<Result<Vec<_>, _>>()?;
        let uid = headers.get("impersonate-uid").map(text).transpose()?;
        let mut extras = Vec::new();
        for (k, v) in headers {
            if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
                extras.push((crate::server::percent_decode(key), text(v)?));
            }
        }
        let Some(name) = name else {
            if groups.is_empty() && uid.is_none() && extras.is_empty() {
                return Ok(user);
            }
            return Err(ApiError::bad_request(
                "impersonating groups, a uid or extra fields requires impersonating a user (Impersonate-User)",
            ));
        };
        let check =
            |group: &str, resource: &str, sub: &str, namespace: &str, name: &str| RequestInfo {
                resource_request: true,
                verb: "impersonate".into(),
                group: group.into(),
                resource: resource.into(),
                subresource: sub.into(),
                namespace: namespace.into(),
                name: name.into(),
                ..RequestInfo::default()
            };
        let service_account = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|sa| sa.split_once(':'));
        let mut checks = vec![match service_account {
            Some((ns, sa)) => check("", "serviceaccounts", "", ns, sa),
            None => check("", "users", "", "", &name),
        }];
        checks.extend(groups.iter().map(|g| check("", "groups", "", "", g)));
        if let Some(uid) = &uid {
            checks.push(check("authentication.k8s.io", "uids", "", "", uid));
        }
        for (key, value) in &extras {
            checks.push(check("authentication.k8s.io", "userextras", key, "", value));
        }
        for c in &checks {
            if !self.authorize(&user, c)?.allowed {
                return Err(forbidden(&user.name, c));
            }
        }
        let mut out_groups = groups;
        let mut add = |g: String| {
            if !out_groups.contains(&g) {
                out_groups.push(g);
            }
        };
        if let Some((ns, _)) = service_account {
            add("system:serviceaccounts".into());
            add(format!("system:serviceaccounts:{ns}"));
        }
        if name == crate::auth::ANONYMOUS_USER {
            add("system:unauthenticated".into());
        } else {
            add("system:authenticated".into());
        }
        Ok(UserInfo {
            name,
            uid: uid.unwrap_or_default(),
            groups: out_groups,
        })
    }

    /// The rules that apply to `user` in `namespace` (cluster-wide ones included).
    ///
    /// # Errors
    /// Fails (500) when the store cannot be read.
    pub fn rules(&self, user: &UserInfo, namespace: &str) -> Result<Vec<Rule>, ApiError> {
        if self.unrestricted(user) {
            return Ok(vec![
                Rule {
                    verbs: strings(&["*"]),
                    api_groups: strings(&["*"]),
                    resources: strings(&["*"]),
                    ..Rule::default()
                },
                Rule {
                    verbs: strings(&["*"]),
                    non_resource_urls: strings(&["*"]),
                    ..Rule::default()
                },
            ]);
        }
        let mut out = Vec::new();
        self.visit(user, namespace, &mut |_, rule| {
            if !out.contains(rule) {
                out.push(rule.clone());
            }
            true
        })?;
        Ok(out)
    }

    /// Call `f` with each rule granted to `user` (and a description of the binding that grants
    /// it) until it returns false: the default grants, ClusterRoleBindings, then the
    /// RoleBindings of `namespace`.
    fn visit(
        &self,
        user: &UserInfo,
        namespace: &str,
        f: &mut dyn FnMut(&str, &Rule) -> bool,
    ) -> Result<(), ApiError> {
        if user.groups.iter().any(|g| g == "system:authenticated") {
            for (role, verbs, groups, resources, urls) in DEFAULT_GRANTS {
                let rule = Rule {
                    verbs: strings(verbs),
                    api_groups: strings(groups),
                    resources: strings(resources),
                    resource_names: Vec::new(),
                    non_resource_urls: strings(urls),
                };
                let source = format!(
                    "ClusterRoleBinding \"{role}\" of ClusterRole \"{role}\" to Group \"system:authenticated\""
                );
                if !f(&source, &rule) {
                    return Ok(());
                }
            }
        }
        let mut bindings = self.list(&format!("/{ROOT}/{RBAC}/clusterrolebindings/"))?;
        if !namespace.is_empty() {
            bindings.extend(self.list(&format!("/{ROOT}/{RBAC}/rolebindings/{namespace}/"))?);
        }
        for binding in bindings {
            let kind = binding["kind"].as_str().unwrap_or("");
            let cluster_wide = kind == "ClusterRoleBinding";
            let bname = binding["metadata"]["name"].as_str().unwrap_or("");
            let bns = if cluster_wide { "" } else { namespace };
            let Some(subject) = binding["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| subject_matches(user, s, bns))
            else {
                continue;
            };
            let role_ref = &binding["roleRef"];
            let role_kind = role_ref["kind"].as_str().unwrap_or("");
            let role_name = role_ref["name"].as_str().unwrap_or("");
            let role_key = match role_kind {
                "ClusterRole" => format!("/{ROOT}/{RBAC}/clusterroles/{role_name}"),
                "Role" if !cluster_wide => format!("/{ROOT}/{RBAC}/roles/{namespace}/{role_name}"),
                _ => continue,
            };
            let Some((_, role)) = self
                .store
                .get(&role_key)
                .map_err(|e| ApiError::internal(e.to_string()))?
            else {
                continue;
            };
            let binding_name = if cluster_wide {
                format!("ClusterRoleBinding {bname:?}")
            } else {
                format!("RoleBinding \"{bname}/{namespace}\"")
            };
            let source = format!(
                "{binding_name} of {role_kind} {role_name:?} to {}",
                describe_subject(subject, bns)
            );
            for rule in self.role_rules(&role)? {
                if !f(&source, &Rule::from_json(&rule)) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A role's rules. An aggregated ClusterRole's (`aggregationRule`) are those of the
    /// ClusterRoles its selectors match, computed here as kube-controller-manager's aggregation
    /// controller would write them: a selected role that is itself aggregated contributes its
    /// aggregated rules (kube's `admin` selects `edit`, which selects `view`'s roles), each role
    /// visited once.
    fn role_rules(&self, role: &Value) -> Result<Vec<Value>, ApiError> {
        if role["aggregationRule"]["clusterRoleSelectors"].is_array() {
            let all = self.list(&format!("/{ROOT}/{RBAC}/clusterroles/"))?;
            let mut seen = Vec::new();
            let mut out = Vec::new();
            aggregate(role, &all, &mut seen, &mut out);
            return Ok(out);
        }
        Ok(role["rules"].as_array().cloned().unwrap_or_default())
    }

    /// kube-apiserver's RBAC escalation check, for `user` writing `obj` (a Role, ClusterRole,
    /// RoleBinding or ClusterRoleBinding: `plural`) in `namespace`: a role may only hold rules
    /// the writer holds (in that namespace; cluster-wide for a ClusterRole) unless the writer may
    /// `escalate` it, and a binding may only grant a role whose rules the writer holds (in the
    /// binding's namespace) unless the writer may `bind` it. An aggregated ClusterRole needs
    /// every permission. Only the rules count, never who the writer is.
    ///
    /// # Errors
    /// 403 naming the permissions not held, as kube-apiserver words it.
    pub fn check_escalation(
        &self,
        user: &UserInfo,
        plural: &str,
        obj: &Value,
        namespace: &str,
    ) -> Result<(), ApiError> {
        if self.unrestricted(user) {
            return Ok(());
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        let attrs = |verb: &str, resource: &str, namespace: &str, name: &str| RequestInfo {
            resource_request: true,
            verb: verb.into(),
            group: RBAC.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..RequestInfo::default()
        };
        let forbidden = |why: String| {
            ApiError::new(
                403,
                "Forbidden",
                format!("{plural}.{RBAC} {name:?} is forbidden: {why}"),
            )
            .with_details(json!({"group": RBAC, "kind": plural, "name": name}))
        };
        let (scope, wanted): (&str, Vec<Value>) = match plural {
            "roles" | "clusterroles" => {
                let scope = if plural == "roles" { namespace } else { "" };
                if self
                    .authorize(user, &attrs("escalate", plural, scope, name))?
                    .allowed
                {
                    return Ok(());
                }
                if plural == "clusterroles" && !obj["aggregationRule"].is_null() {
                    let all = [
                        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                        json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
                    ];
                    if !self.missing(user, "", &all)?.is_empty() {
                        return Err(forbidden(
                            "must have cluster-admin privileges to use the aggregationRule".into(),
                        ));
                    }
                    return Ok(());
                }
                (scope, obj["rules"].as_array().cloned().unwrap_or_default())
            }
            "rolebindings" | "clusterrolebindings" => {
                let scope = if plural == "rolebindings" {
                    namespace
                } else {
                    ""
                };
                let kind = obj["roleRef"]["kind"].as_str().unwrap_or("");
                let role = obj["roleRef"]["name"].as_str().unwrap_or("");
                let (role_plural, key) = match kind {
                    "ClusterRole" => (
                        "clusterroles",
                        format!("/{ROOT}/{RBAC}/clusterroles/{role}"),
                    ),
                    "Role" if plural == "rolebindings" => {
                        ("roles", format!("/{ROOT}/{RBAC}/roles/{namespace}/{role}"))
                    }
                    _ => return Ok(()), // refused by validation, or grants nothing
                };
                if self
                    .authorize(user, &attrs("bind", role_plural, scope, role))?
                    .allowed
                {
                    return Ok(());
                }
                let Some((_, role_obj)) = self
                    .store
                    .get(&key)
                    .map_err(|e| ApiError::internal(e.to_string()))?
                else {
                    return Err(forbidden(format!(
                        "{role_plural}.{RBAC} {role:?} not found"
                    )));
                };
                (scope, self.role_rules(&role_obj)?)
            }
            _ => return Ok(()),
        };
        let missing = self.missing(user, scope, &wanted)?;
        if missing.is_empty() {
            return Ok(());
        }
        let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
        Err(forbidden(format!(
            "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            groups.join(" "),
            missing.join("\n")
        )))
    }

    /// The parts of `wanted` (rules, as JSON) that `user`'s rules in `namespace` do not cover,
    /// one line per uncovered verb and resource (or path), as kube-apiserver lists them.
    fn missing(
        &self,
        user: &UserInfo,
        namespace: &str,
        wanted: &[Value],
    ) -> Result<Vec<String>, ApiError> {
        let held = self.rules(user, namespace)?;
        let mut out = Vec::new();
        for rule in wanted.iter().map(Rule::from_json) {
            for simple in rule.breakdown() {
                if !held.iter().any(|h| h.covers(&simple)) {
                    let line = simple.compact();
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
            }
        }
        Ok(out)
    }

    fn list(&self, prefix: &str) -> Result<Vec<std::sync::Arc<Value>>, ApiError> {
        let page = self
            .store
            .list(prefix, None, None)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(page.items.into_iter().map(|(_, v)| v).collect())
    }
}

/// Add to `out` the rules of the aggregated ClusterRole `role`: those of each role of `all` its
/// selectors match, recursively for aggregated ones; `seen` names the roles already visited.
fn aggregate(
    role: &Value,
    all: &[std::sync::Arc<Value>],
    seen: &mut Vec<Value>,
    out: &mut Vec<Value>,
) {
    let name = role["metadata"]["name"].clone();
    if seen.contains(&name) {
        return;
    }
    seen.push(name);
    let Some(selectors) = role["aggregationRule"]["clusterRoleSelectors"].as_array() else {
        return;
    };
    for other in all {
        if seen.contains(&other["metadata"]["name"])
            || !selectors
                .iter()
                .any(|s| label_selector_matches(s, &other["metadata"]["labels"]))
        {
            continue;
        }
        if other["aggregationRule"]["clusterRoleSelectors"].is_array() {
            aggregate(other, all, seen, out);
            continue;
        }
        seen.push(other["metadata"]["name"].clone());
        for rule in other["rules"].as_array().into_iter().flatten() {
            if !out.contains(rule) {
                out.push(rule.clone());
            }
        }
    }
}

/// Whether a `metav1.LabelSelector` (`matchLabels`, `matchExpressions` with `In`, `NotIn`,
/// `Exists`, `DoesNotExist`) matches `labels`; an empty selector matches everything, an unknown
/// operator nothing.
fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector["matchLabels"].as_object();
    if match_labels
        .into_iter()
        .flatten()
        .any(|(k, v)| label(k) != v.as_str())
    {
        return false;
    }
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str().unwrap_or("") {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        })
}

/// Whether binding subject `s` names `user`; `namespace` is the RoleBinding's (`""` for a
/// ClusterRoleBinding), the default namespace of a ServiceAccount subject.
fn subject_matches(user: &UserInfo, s: &Value, namespace: &str) -> bool {
    let name = s["name"].as_str().unwrap_or("");
    match s["kind"].as_str().unwrap_or("") {
        "User" => !name.is_empty() && user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            !ns.is_empty()
                && !name.is_empty()
                && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn describe_subject(s: &Value, namespace: &str) -> String {
    let name = s["name"].as_str().unwrap_or("");
    match s["kind"].as_str().unwrap_or("") {
        "ServiceAccount" => {
            let ns = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            format!("ServiceAccount \"{name}/{ns}\"")
        }
        kind => format!("{kind} {name:?}"),
    }
}

/// The 403 kube-apiserver answers when `user` may not do `a`.
pub fn forbidden(user: &str, a: &RequestInfo) -> ApiError {
    if !a.resource_request {
        return ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User {user:?} cannot {} path {:?}",
                a.verb, a.path
            ),
        )
        .with_details(json!({}));
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    let why = format!(
        "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        a.verb, a.group
    );
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", a.name)
    };
    let mut details = json!({"kind": a.resource});
    if !a.group.is_empty() {
        details["group"] = json!(a.group);
    }
    if !a.name.is_empty() {
        details["name"] = json!(a.name);
    }
    ApiError::new(403, "Forbidden", message).with_details(details)
}

/// The `status` of a `SelfSubjectRulesReview`: `rules` split into resource and non-resource rules.
pub fn rules_status(rules: &[Rule]) -> Value {
    let (non_resource, resource): (Vec<&Rule>, Vec<&Rule>) =
        rules.iter().partition(|r| !r.non_resource_urls.is_empty());
    json!({
        "resourceRules": resource.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        "nonResourceRules": non_resource.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        "incomplete": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Op, Precondition};

    fn info(method: Method, path: &str) -> RequestInfo {
        let (path, query) = path
            .split_once('?')
            .map_or((path, None), |(p, q)| (p, Some(q)));
        RequestInfo::parse(&method, path, query)
    }

    /// (verb, group, resource, subresource, namespace, name) of a resource request.
    fn attrs(i: &RequestInfo) -> (&str, &str, &str, &str, &str, &str) {
        assert!(i.resource_request, "{i:?}");
        (
            &i.verb,
            &i.group,
            &i.resource,
            &i.subresource,
            &i.namespace,
            &i.name,
        )
    }

    #[test]
    fn request_attributes_are_read_as_kube_apiserver_reads_them() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps",
                ("list", "", "configmaps", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps?watch=true",
                ("watch", "", "configmaps", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps?watch=1&fieldSelector=metadata.name%3Dx",
                ("watch", "", "configmaps", "", "a", "x"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps/x?watch=true",
                ("watch", "", "configmaps", "", "a", "x"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps/x",
                ("get", "", "configmaps", "", "a", "x"),
            ),
            (
                Method::HEAD,
                "/api/v1/configmaps",
                ("list", "", "configmaps", "", "", ""),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/a/deployments",
                ("create", "apps", "deployments", "", "a", ""),
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/status",
                ("update", "apps", "deployments", "status", "a", "d"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                ("patch", "apps", "deployments", "scale", "a", "d"),
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/deployments/d",
                ("delete", "apps", "deployments", "", "a", "d"),
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/deployments",
                ("deletecollection", "apps", "deployments", "", "a", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                ("list", "", "namespaces", "", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a",
                ("get", "", "namespaces", "", "a", "a"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/a/finalize",
                ("update", "", "namespaces", "finalize", "a", "a"),
            ),
            (
                Method::GET,
                "/clusters/member1/api/v1/namespaces/a/pods/p",
                ("get", "", "pods", "", "a", "p"),
            ),
            (
                Method::GET,
                "/apis/cluster.karmada.io/v1alpha1/clusters/m1/proxy/api/v1/pods",
                ("get", "cluster.karmada.io", "clusters", "proxy", "", "m1"),
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(attrs(&info(method, path)), want, "{path}");
        }
        for (path, want) in [
            ("/version", "/version"),
            ("/healthz/ping", "/healthz/ping"),
            ("/api", "/api"),
            ("/api/v1", "/api/v1"),
            ("/apis/apps", "/apis/apps"),
            ("/apis/apps/v1", "/apis/apps/v1"),
            ("/openapi/v3/apis/apps/v1", "/openapi/v3/apis/apps/v1"),
            ("/clusters/member1/version", "/version"),
            ("/version/", "/version/"),
        ] {
            let i = info(Method::GET, path);
            assert!(!i.resource_request, "{path}");
            assert_eq!((i.verb.as_str(), i.path.as_str()), ("get", want));
        }
        assert_eq!(info(Method::POST, "/foo").verb, "post");
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
        Rule {
            verbs: strings(verbs),
            api_groups: strings(groups),
            resources: strings(resources),
            resource_names: strings(names),
            non_resource_urls: Vec::new(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_names_and_paths() {
        let get_cm = info(Method::GET, "/api/v1/namespaces/a/configmaps/x");
        let deploy_status = info(
            Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/d/status",
        );
        let deploy = info(Method::PUT, "/apis/apps/v1/namespaces/a/deployments/d");

        assert!(rule(&["get"], &[""], &["configmaps"], &[]).allows(&get_cm));
        assert!(rule(&["*"], &["*"], &["*"], &[]).allows(&get_cm));
        assert!(!rule(&["list"], &[""], &["configmaps"], &[]).allows(&get_cm));
        assert!(!rule(&["get"], &["apps"], &["configmaps"], &[]).allows(&get_cm));
        assert!(!rule(&["get"], &[""], &["secrets"], &[]).allows(&get_cm));
        assert!(rule(&["get"], &[""], &["configmaps"], &["x", "y"]).allows(&get_cm));
        assert!(!rule(&["get"], &[""], &["configmaps"], &["y"]).allows(&get_cm));
        // A list is only allowed by a rule without names, unless a field selector names one.
        let list = info(Method::GET, "/api/v1/namespaces/a/configmaps");
        assert!(!rule(&["list"], &[""], &["configmaps"], &["x"]).allows(&list));
        let list_x = info(
            Method::GET,
            "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dx",
        );
        assert!(rule(&["list"], &[""], &["configmaps"], &["x"]).allows(&list_x));

        // Subresources: only `resource/sub`, `*/sub` or `*` match them.
        assert!(!rule(&["update"], &["apps"], &["deployments"], &[]).allows(&deploy_status));
        assert!(rule(&["update"], &["apps"], &["deployments/status"], &[]).allows(&deploy_status));
        assert!(rule(&["update"], &["apps"], &["*/status"], &[]).allows(&deploy_status));
        assert!(rule(&["update"], &["apps"], &["*"], &[]).allows(&deploy_status));
        assert!(!rule(&["update"], &["apps"], &["*/scale"], &[]).allows(&deploy_status));
        assert!(!rule(&["update"], &["apps"], &["deployments/status"], &[]).allows(&deploy));
        assert!(!rule(&["update"], &["apps"], &["*/status"], &[]).allows(&deploy));

        let urls = |u: &[&str]| Rule {
            verbs: strings(&["get"]),
            non_resource_urls: strings(u),
            ..Rule::default()
        };
        let healthz = info(Method::GET, "/healthz/etcd");
        assert!(urls(&["/healthz/*"]).allows(&healthz));
        assert!(urls(&["*"]).allows(&healthz));
        assert!(urls(&["/healthz/etcd"]).allows(&healthz));
        assert!(!urls(&["/healthz"]).allows(&healthz));
        assert!(!urls(&["/version/*"]).allows(&healthz));
        // Resource rules never allow paths, nor path rules resources.
        assert!(!rule(&["*"], &["*"], &["*"], &[]).allows(&healthz));
        assert!(!urls(&["*"]).allows(&get_cm));
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.to_owned(),
            uid: String::new(),
            groups: strings(groups),
        }
    }

    async fn put(store: &Store, key: &str, obj: Value) {
        store
            .write(
                format!("/{ROOT}/{RBAC}/{key}"),
                Op::Put(obj),
                Precondition::Absent,
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn bindings_scope_roles_to_their_namespace_or_the_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let cm_reader = json!({"kind": "Role", "metadata": {"name": "cm-reader", "namespace": "team-a"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]});
        put(&store, "roles/team-a/cm-reader", cm_reader).await;
        put(&store, "clusterroles/deployer", json!({"kind": "ClusterRole", "metadata": {"name": "deployer"},
            "rules": [{"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments", "deployments/scale"]}]})).await;
        put(
            &store,
            "clusterroles/metrics",
            json!({"kind": "ClusterRole", "metadata": {"name": "metrics"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}),
        )
        .await;
        put(
            &store,
            "rolebindings/team-a/read",
            json!({"kind": "RoleBinding", "metadata": {"name": "read", "namespace": "team-a"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "readers"},
                         {"kind": "ServiceAccount", "name": "bot"}]}),
        )
        .await;
        // A RoleBinding of a ClusterRole grants it in its namespace only.
        put(
            &store,
            "rolebindings/team-b/deploy",
            json!({"kind": "RoleBinding", "metadata": {"name": "deploy", "namespace": "team-b"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "deployer"},
            "subjects": [{"kind": "User", "name": "alice"}]}),
        )
        .await;
        put(
            &store,
            "clusterrolebindings/ci",
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "ci"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "deployer"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]}),
        )
        .await;
        put(
            &store,
            "clusterrolebindings/scrape",
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "scrape"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "metrics"},
            "subjects": [{"kind": "Group", "name": "readers"}]}),
        )
        .await;
        // A ClusterRoleBinding cannot grant a Role.
        put(
            &store,
            "clusterrolebindings/bad",
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "bad"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-reader"},
            "subjects": [{"kind": "User", "name": "mallory"}]}),
        )
        .await;

        let authz = Authorizer::new(&store, false);
        let may =
            |u: &UserInfo, m: Method, p: &str| authz.authorize(u, &info(m, p)).unwrap().allowed;
        let alice = user("alice", &["system:authenticated"]);
        assert!(may(
            &alice,
            Method::GET,
            "/api/v1/namespaces/team-a/configmaps"
        ));
        assert!(may(
            &alice,
            Method::GET,
            "/clusters/member1/api/v1/namespaces/team-a/configmaps/x"
        ));
        assert!(!may(
            &alice,
            Method::GET,
            "/api/v1/namespaces/default/configmaps"
        ));
        assert!(!may(&alice, Method::GET, "/api/v1/configmaps"));
        assert!(!may(
            &alice,
            Method::POST,
            "/api/v1/namespaces/team-a/configmaps"
        ));
        assert!(!may(
            &alice,
            Method::POST,
            "/apis/apps/v1/namespaces/team-a/deployments"
        ));
        assert!(may(
            &alice,
            Method::POST,
            "/apis/apps/v1/namespaces/team-b/deployments"
        ));
        assert!(may(
            &alice,
            Method::PUT,
            "/apis/apps/v1/namespaces/team-b/deployments/d/scale"
        ));
        assert!(!may(
            &alice,
            Method::PUT,
            "/apis/apps/v1/namespaces/team-b/deployments/d/status"
        ));
        assert!(!may(&alice, Method::GET, "/apis/apps/v1/deployments"));
        assert!(!may(&alice, Method::GET, "/metrics"));
        // The default grants of every authenticated user.
        for path in [
            "/api",
            "/apis",
            "/apis/apps/v1",
            "/version",
            "/healthz",
            "/openapi/v3",
        ] {
            assert!(may(&alice, Method::GET, path), "{path}");
        }
        assert!(may(
            &alice,
            Method::POST,
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        ));
        assert!(!may(&alice, Method::POST, "/api"));
        let reason = authz
            .authorize(
                &alice,
                &info(Method::GET, "/api/v1/namespaces/team-a/configmaps"),
            )
            .unwrap()
            .reason;
        assert_eq!(
            reason,
            "RBAC: allowed by RoleBinding \"read/team-a\" of Role \"cm-reader\" to User \"alice\""
        );

        let reader = user("bob", &["readers", "system:authenticated"]);
        assert!(may(
            &reader,
            Method::GET,
            "/api/v1/namespaces/team-a/configmaps/x"
        ));
        assert!(may(&reader, Method::GET, "/metrics"));
        assert!(!may(
            &reader,
            Method::GET,
            "/api/v1/namespaces/team-b/configmaps/x"
        ));

        // ServiceAccounts: `system:serviceaccount:<ns>:<name>`, a RoleBinding's namespace by default.
        let bot = user(
            "system:serviceaccount:team-a:bot",
            &["system:authenticated"],
        );
        assert!(may(
            &bot,
            Method::GET,
            "/api/v1/namespaces/team-a/configmaps"
        ));
        let other_bot = user(
            "system:serviceaccount:team-b:bot",
            &["system:authenticated"],
        );
        assert!(!may(
            &other_bot,
            Method::GET,
            "/api/v1/namespaces/team-a/configmaps"
        ));
        let ci = user("system:serviceaccount:tools:ci", &["system:authenticated"]);
        assert!(may(
            &ci,
            Method::DELETE,
            "/apis/apps/v1/namespaces/any/deployments"
        ));
        assert!(may(&ci, Method::GET, "/apis/apps/v1/deployments"));
        assert!(!may(
            &ci,
            Method::GET,
            "/apis/apps/v1/namespaces/any/replicasets"
        ));
        let reason = authz
            .authorize(&ci, &info(Method::GET, "/apis/apps/v1/deployments"))
            .unwrap()
            .reason;
        assert_eq!(
            reason,
            "RBAC: allowed by ClusterRoleBinding \"ci\" of ClusterRole \"deployer\" to ServiceAccount \"ci/tools\""
        );

        let mallory = user("mallory", &["system:authenticated"]);
        assert!(!may(
            &mallory,
            Method::GET,
            "/api/v1/namespaces/team-a/configmaps"
        ));
        // Unauthenticated users get no default grants; masters bypass RBAC.
        assert!(!may(&UserInfo::anonymous(), Method::GET, "/version"));
        assert!(may(
            &UserInfo::admin(),
            Method::DELETE,
            "/api/v1/namespaces/x"
        ));
        assert!(
            Authorizer::new(&store, true)
                .authorize(
                    &UserInfo::anonymous(),
                    &info(Method::DELETE, "/api/v1/namespaces/x")
                )
                .unwrap()
                .allowed
        );

        let rules = authz.rules(&alice, "team-a").unwrap();
        assert!(rules.contains(&rule(&["get", "list"], &[""], &["configmaps"], &[])));
        assert!(!rules.iter().any(|r| r.api_groups == ["apps"]));
        let status = rules_status(&authz.rules(&alice, "team-b").unwrap());
        assert!(
            status["resourceRules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resources"] == json!(["deployments", "deployments/scale"]))
        );
        assert!(
            status["nonResourceRules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["nonResourceURLs"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("/version")))
        );
    }

    #[tokio::test]
    async fn impersonation_needs_the_impersonate_verb_on_each_thing_impersonated() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, "clusterroles/as-bots", json!({"kind": "ClusterRole", "metadata": {"name": "as-bots"},
            "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["bot"]},
                      {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"], "resourceNames": ["bots"]},
                      {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]}]})).await;
        put(
            &store,
            "clusterrolebindings/ops",
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "ops"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "as-bots"},
            "subjects": [{"kind": "User", "name": "ops"}]}),
        )
        .await;
        let authz = Authorizer::new(&store, false);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, v.parse().unwrap());
            }
            h
        };
        let ops = user("ops", &["system:authenticated"]);
        assert_eq!(
            authz.impersonate(ops.clone(), &HeaderMap::new()).unwrap(),
            ops
        );
        let bot = authz
            .impersonate(
                ops.clone(),
                &headers(&[("impersonate-user", "bot"), ("impersonate-group", "bots")]),
            )
            .unwrap();
        assert_eq!(bot, user("bot", &["bots", "system:authenticated"]));
        let sa = authz
            .impersonate(
                ops.clone(),
                &headers(&[("impersonate-user", "system:serviceaccount:ci:builder")]),
            )
            .unwrap();
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ci",
                "system:authenticated"
            ]
        );
        let e = authz
            .impersonate(
                ops.clone(),
                &headers(&[("impersonate-user", "flotilla-admin")]),
            )
            .unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "users \"flotilla-admin\" is forbidden: User \"ops\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        let e = authz
            .impersonate(
                ops.clone(),
                &headers(&[
                    ("impersonate-user", "bot"),
                    ("impersonate-group", "system:masters"),
                ]),
            )
            .unwrap_err();
        assert!(
            e.message
                .starts_with("groups \"system:masters\" is forbidden"),
            "{}",
            e.message
        );
        let e = authz
            .impersonate(ops.clone(), &headers(&[("impersonate-group", "bots")]))
            .unwrap_err();
        assert_eq!(e.code, 400);
        // Masters may impersonate anyone.
        let alice = authz
            .impersonate(
                UserInfo::admin(),
                &headers(&[("impersonate-user", "alice")]),
            )
            .unwrap();
        assert_eq!(alice, user("alice", &["system:authenticated"]));
    }

    #[tokio::test]
    async fn aggregated_cluster_roles_have_the_rules_of_the_roles_they_select() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(
            &store,
            "clusterroles/view",
            json!({"kind": "ClusterRole", "metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}},
                {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["read"]}]}]},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}),
        )
        .await;
        put(&store, "clusterroles/view-cm", json!({"kind": "ClusterRole",
            "metadata": {"name": "view-cm", "labels": {"rbac.example.com/aggregate-to-view": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]})).await;
        put(
            &store,
            "clusterroles/view-deploy",
            json!({"kind": "ClusterRole",
            "metadata": {"name": "view-deploy", "labels": {"tier": "read"}},
            "rules": [{"verbs": ["list"], "apiGroups": ["apps"], "resources": ["deployments"]}]}),
        )
        .await;
        put(
            &store,
            "clusterroles/edit-secrets",
            json!({"kind": "ClusterRole",
            "metadata": {"name": "edit-secrets", "labels": {"tier": "write"}},
            "rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["secrets"]}]}),
        )
        .await;
        put(
            &store,
            "rolebindings/a/view",
            json!({"kind": "RoleBinding", "metadata": {"name": "view", "namespace": "a"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}]}),
        )
        .await;
        let authz = Authorizer::new(&store, false);
        let alice = user("alice", &["system:authenticated"]);
        let may = |m: Method, p: &str| authz.authorize(&alice, &info(m, p)).unwrap().allowed;
        assert!(may(Method::GET, "/api/v1/namespaces/a/configmaps/x"));
        assert!(may(Method::GET, "/apis/apps/v1/namespaces/a/deployments"));
        // Not the aggregated role's own (stale) rules, nor an unselected role's.
        assert!(!may(Method::GET, "/api/v1/namespaces/a/secrets/x"));
        assert!(!may(Method::DELETE, "/api/v1/namespaces/a/configmaps/x"));
        let selects = |sel: Value, labels: Value| label_selector_matches(&sel, &labels);
        assert!(selects(json!({}), json!(null)));
        assert!(selects(
            json!({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]}),
            json!({})
        ));
        assert!(!selects(
            json!({"matchExpressions": [{"key": "t", "operator": "Exists"}]}),
            json!({})
        ));
        assert!(selects(
            json!({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}),
            json!({"u": "1"})
        ));
        assert!(!selects(
            json!({"matchExpressions": [{"key": "t", "operator": "Gt", "values": ["1"]}]}),
            json!({"t": "2"})
        ));
    }

    #[test]
    fn coverage_is_checked_per_verb_and_resource() {
        let held = |r: Value| Rule::from_json(&r);
        let wanted = |r: Value| Rule::from_json(&r).breakdown();
        let covered = |h: &Rule, w: Value| wanted(w).iter().all(|s| h.covers(s));
        let cm =
            held(json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}));
        assert!(covered(
            &cm,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]})
        ));
        assert!(covered(
            &cm,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"]})
        ));
        assert!(!covered(
            &cm,
            json!({"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["configmaps"]})
        ));
        assert!(!covered(
            &cm,
            json!({"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]})
        ));
        assert!(!covered(
            &cm,
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["configmaps"]})
        ));
        assert!(!covered(
            &cm,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps/status"]})
        ));
        let subs = held(json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*/scale"]}));
        assert!(covered(
            &subs,
            json!({"verbs": ["patch"], "apiGroups": ["apps"], "resources": ["deployments/scale"]})
        ));
        assert!(!covered(
            &subs,
            json!({"verbs": ["patch"], "apiGroups": ["apps"], "resources": ["deployments"]})
        ));
        let named = held(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"]}),
        );
        assert!(covered(
            &named,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]})
        ));
        assert!(!covered(
            &named,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})
        ));
        assert!(!covered(
            &named,
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["c"]})
        ));
        let paths = held(json!({"verbs": ["get"], "nonResourceURLs": ["/logs/*"]}));
        assert!(covered(
            &paths,
            json!({"verbs": ["get"], "nonResourceURLs": ["/logs/a", "/logs/*"]})
        ));
        assert!(!covered(
            &paths,
            json!({"verbs": ["get"], "nonResourceURLs": ["/metrics"]})
        ));
        assert_eq!(
            wanted(json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["d"]}))[0].compact(),
            "{APIGroups:[\"apps\"], Resources:[\"deployments\"], ResourceNames:[\"d\"], Verbs:[\"get\"]}"
        );
    }

    #[tokio::test]
    async fn rbac_writers_cannot_grant_more_than_they_hold() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, "roles/a/rbac-editor", json!({"kind": "Role", "metadata": {"name": "rbac-editor", "namespace": "a"},
            "rules": [{"verbs": ["create", "update"], "apiGroups": [RBAC], "resources": ["roles", "rolebindings"]},
                      {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]})).await;
        put(
            &store,
            "rolebindings/a/alice",
            json!({"kind": "RoleBinding", "metadata": {"name": "alice", "namespace": "a"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "rbac-editor"},
            "subjects": [{"kind": "User", "name": "alice"}]}),
        )
        .await;
        put(
            &store,
            "roles/a/cm-reader",
            json!({"kind": "Role", "metadata": {"name": "cm-reader", "namespace": "a"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}),
        )
        .await;
        put(
            &store,
            "clusterroles/everything",
            json!({"kind": "ClusterRole", "metadata": {"name": "everything"},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}),
        )
        .await;
        let authz = Authorizer::new(&store, false);
        let alice = user("alice", &["devs", "system:authenticated"]);
        let role = |rules: Value| json!({"metadata": {"name": "r"}, "rules": rules});
        let binding = |kind: &str, name: &str| json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": RBAC, "kind": kind, "name": name}});

        authz
            .check_escalation(
                &alice,
                "roles",
                &role(json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}])),
                "a",
            )
            .unwrap();
        let e = authz
            .check_escalation(&alice, "roles", &role(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets", "configmaps"]}])), "a")
            .unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
        );
        // What alice holds in `a` she does not hold in `b`.
        assert!(
            authz
                .check_escalation(
                    &alice,
                    "roles",
                    &role(
                        json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}])
                    ),
                    "b"
                )
                .is_err()
        );
        authz
            .check_escalation(&alice, "rolebindings", &binding("Role", "cm-reader"), "a")
            .unwrap();
        let e = authz
            .check_escalation(
                &alice,
                "rolebindings",
                &binding("ClusterRole", "everything"),
                "a",
            )
            .unwrap_err();
        assert!(
            e.message
                .contains("attempting to grant RBAC permissions not currently held"),
            "{}",
            e.message
        );
        let e = authz
            .check_escalation(&alice, "rolebindings", &binding("Role", "missing"), "a")
            .unwrap_err();
        assert!(
            e.message
                .ends_with("roles.rbac.authorization.k8s.io \"missing\" not found"),
            "{}",
            e.message
        );
        let e = authz
            .check_escalation(&alice, "clusterroles", &json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{}]}}), "")
            .unwrap_err();
        assert!(
            e.message
                .contains("must have cluster-admin privileges to use the aggregationRule")
        );

        // `bind` and `escalate` lift the checks, as in kube-apiserver.
        put(&store, "roles/a/binder", json!({"kind": "Role", "metadata": {"name": "binder", "namespace": "a"},
            "rules": [{"verbs": ["bind"], "apiGroups": [RBAC], "resources": ["clusterroles"], "resourceNames": ["everything"]},
                      {"verbs": ["escalate"], "apiGroups": [RBAC], "resources": ["roles"]}]})).await;
        put(
            &store,
            "rolebindings/a/alice-binder",
            json!({"kind": "RoleBinding", "metadata": {"name": "alice-binder", "namespace": "a"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "binder"},
            "subjects": [{"kind": "Group", "name": "devs"}]}),
        )
        .await;
        authz
            .check_escalation(
                &alice,
                "rolebindings",
                &binding("ClusterRole", "everything"),
                "a",
            )
            .unwrap();
        authz
            .check_escalation(
                &alice,
                "roles",
                &role(json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])),
                "a",
            )
            .unwrap();
        authz
            .check_escalation(
                &UserInfo::admin(),
                "clusterrolebindings",
                &binding("ClusterRole", "everything"),
                "",
            )
            .unwrap();
    }

    #[test]
    fn denials_are_worded_as_kube_apiserver_words_them() {
        let e = forbidden(
            "alice",
            &info(Method::GET, "/api/v1/namespaces/default/configmaps"),
        );
        assert_eq!((e.code, e.reason), (403, "Forbidden"));
        assert_eq!(
            e.message,
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let e = forbidden(
            "alice",
            &info(
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
            ),
        );
        assert_eq!(
            e.message,
            "deployments.apps \"d\" is forbidden: User \"alice\" cannot update resource \"deployments/scale\" in API group \"apps\" in the namespace \"a\""
        );
        assert_eq!(
            e.details,
            Some(json!({"group": "apps", "kind": "deployments", "name": "d"}))
        );
        let e = forbidden("alice", &info(Method::GET, "/apis/apps/v1/deployments"));
        assert!(
            e.message
                .ends_with("in API group \"apps\" at the cluster scope"),
            "{}",
            e.message
        );
        let e = forbidden("alice", &info(Method::GET, "/metrics"));
        assert_eq!(
            e.message,
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
    }
}
