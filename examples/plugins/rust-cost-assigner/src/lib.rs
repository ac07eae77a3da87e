//! rust-cost-assigner: a Flotilla assign plugin in Rust. Divides a binding's replicas cheapest
//! cluster first.
//!
//! Each cluster's price per replica is the number in a label (config `label`, default
//! `example.com/cost-per-replica`, e.g. `"0.021"`). Clusters are filled in price order, each up to
//! its available replicas (the estimator's figure the host passes in every assign row), ties
//! broken by cluster name. Clusters without a valid price are the most expensive: they are used
//! last, after every priced cluster is full (config `unpriced: last`, the default), or never
//! (`unpriced: exclude`).
//!
//! Only `Divided` bindings are handled; `Duplicated` bindings and `Divided` ones with an explicit
//! `staticWeightList` are skipped, so the next assigner of the profile (the built-ins) handles them.
//! The previous assignment is not consulted: every call recomputes the cheapest placement.
//!
//! Config: `{"label": "example.com/cost-per-replica", "unpriced": "last"}` (both optional).

use std::collections::BTreeMap;

use flotilla_pdk::abi::{AssignReply, BindingRequest, InitRequest};
use flotilla_pdk::{Detail, Plugin, host};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// Default price label.
pub const DEFAULT_LABEL: &str = "example.com/cost-per-replica";

/// What to do with clusters that carry no (valid) price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unpriced {
    /// Most expensive: used only once every priced cluster is full.
    #[default]
    Last,
    /// Never used.
    Exclude,
}

/// Plugin config.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Label holding the price per replica.
    pub label: String,
    /// Clusters without a price.
    pub unpriced: Unpriced,
}

impl Default for Config {
    fn default() -> Self {
        Config { label: DEFAULT_LABEL.to_owned(), unpriced: Unpriced::Last }
    }
}

/// The fields of a Karmada `Cluster` this plugin reads (the rest is skipped while parsing).
#[derive(Debug, Deserialize)]
pub struct Cluster {
    /// Metadata.
    pub metadata: Meta,
}

/// Cluster metadata.
#[derive(Debug, Deserialize)]
pub struct Meta {
    /// Name.
    pub name: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The part of a `Placement` this plugin reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// `replicaScheduling`.
    #[serde(default)]
    pub replica_scheduling: Option<ReplicaScheduling>,
}

/// `replicaScheduling`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaScheduling {
    /// `Duplicated` or `Divided` (Karmada's default when `replicaScheduling` is set).
    #[serde(default)]
    pub replica_scheduling_type: Option<String>,
    /// `weightPreference`.
    #[serde(default)]
    pub weight_preference: Option<WeightPreference>,
}

/// `weightPreference`: only whether static weights are listed matters here.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightPreference {
    /// `staticWeightList`.
    #[serde(default)]
    pub static_weight_list: Vec<IgnoredAny>,
}

/// The plugin.
#[derive(Debug)]
pub struct CostAssigner {
    config: Config,
}

impl CostAssigner {
    /// The price of a cluster, if it has a valid one (a finite, non-negative number).
    fn price(&self, cluster: &Cluster) -> Option<f64> {
        let raw = cluster.metadata.labels.get(&self.config.label)?;
        match raw.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => Some(p),
            _ => {
                let name = &cluster.metadata.name;
                host::log(flotilla_pdk::abi::log_level::WARN, &format!("cluster {name}: {}={raw:?} is not a price; treated as unpriced", self.config.label));
                None
            }
        }
    }

    /// Row positions and replica counts, cheapest first; `Err` with the shortfall when the
    /// clusters cannot hold `replicas`.
    pub fn divide(&self, replicas: i64, clusters: &[(&Cluster, i64)]) -> Result<Vec<(u32, i32)>, i64> {
        let mut order: Vec<(Option<f64>, &str, u32, i64)> = Vec::with_capacity(clusters.len());
        for (pos, (cluster, available)) in clusters.iter().enumerate() {
            let price = self.price(cluster);
            if price.is_none() && self.config.unpriced == Unpriced::Exclude {
                continue;
            }
            order.push((price, cluster.metadata.name.as_str(), pos as u32, (*available).max(0)));
        }
        // Priced clusters by price, then unpriced ones; ties by name.
        order.sort_by(|a, b| {
            let price = match (a.0, b.0) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            };
            price.then_with(|| a.1.cmp(b.1))
        });
        let mut remaining = replicas.max(0);
        let mut out = Vec::new();
        for (_, _, pos, available) in order {
            if remaining == 0 {
                break;
            }
            let take = remaining.min(available);
            if take > 0 {
                out.push((pos, i32::try_from(take).unwrap_or(i32::MAX)));
                remaining -= take;
            }
        }
        if remaining > 0 { Err(remaining) } else { Ok(out) }
    }
}

/// Whether this plugin handles the placement: `Divided` without static weights.
pub fn handles(placement: &Placement) -> bool {
    let Some(rs) = &placement.replica_scheduling else { return false };
    let divided = rs.replica_scheduling_type.as_deref().unwrap_or("Divided") == "Divided";
    let static_weights = rs.weight_preference.as_ref().is_some_and(|w| !w.static_weight_list.is_empty());
    divided && !static_weights
}

impl Plugin for CostAssigner {
    type Cluster = Cluster;
    type Binding = BindingRequest<IgnoredAny, Placement, IgnoredAny>;

    fn new(init: InitRequest) -> Result<Self, String> {
        let config = match init.config {
            None | Some(flotilla_pdk::serde_json::Value::Null) => Config::default(),
            Some(v) => flotilla_pdk::serde_json::from_value(v).map_err(|e| format!("config: {e}"))?,
        };
        if config.label.is_empty() {
            return Err("config: \"label\" must not be empty".into());
        }
        Ok(CostAssigner { config })
    }

    fn assign(&mut self, b: &Self::Binding, clusters: &[Detail<'_, Cluster>]) -> Result<AssignReply, String> {
        if !handles(&b.placement) {
            return Ok(AssignReply::Skip);
        }
        let replicas = b.replicas.ok_or("assign request without replicas")?;
        let rows: Vec<(&Cluster, i64)> = clusters.iter().map(|d| (d.cluster, d.row.available_replicas)).collect();
        Ok(match self.divide(i64::from(replicas), &rows) {
            Ok(assigned) => AssignReply::Assigned(assigned),
            Err(short) => AssignReply::Unschedulable(format!(
                "{short} of {replicas} replica(s) do not fit on the clusters{}",
                if self.config.unpriced == Unpriced::Exclude { " with a price" } else { "" }
            )),
        })
    }
}

flotilla_pdk::export_plugin!(CostAssigner, name = "rust-cost-assigner", version = "0.1.0", points = [assign]);

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, price: Option<&str>) -> Cluster {
        let labels = price.map(|p| (DEFAULT_LABEL.to_owned(), p.to_owned())).into_iter().collect();
        Cluster { metadata: Meta { name: name.into(), labels } }
    }

    fn plugin(config: &str) -> CostAssigner {
        let config = flotilla_pdk::serde_json::from_str(config).unwrap();
        CostAssigner::new(InitRequest { name: "cost".into(), config: Some(config) }).unwrap()
    }

    #[test]
    fn fills_cheapest_first_ties_by_name_unpriced_last() {
        let (c, b, a, d) = (cluster("c", Some("0.03")), cluster("b", Some("0.03")), cluster("a", Some("0.01")), cluster("d", None));
        let rows = [(&c, 10), (&b, 14), (&a, 4), (&d, 30)];
        let p = plugin("null");
        assert_eq!(p.divide(12, &rows), Ok(vec![(2, 4), (1, 8)]));
        assert_eq!(p.divide(30, &rows), Ok(vec![(2, 4), (1, 14), (0, 10), (3, 2)]));
        assert_eq!(p.divide(60, &rows), Err(2));
        let excl = plugin(r#"{"unpriced": "exclude"}"#);
        assert_eq!(excl.divide(30, &rows), Err(2));
    }

    #[test]
    fn invalid_prices_are_unpriced_and_bad_config_is_rejected() {
        let (x, y) = (cluster("x", Some("cheap")), cluster("y", Some("5")));
        assert_eq!(plugin("{}").divide(3, &[(&x, 5), (&y, 1)]), Ok(vec![(1, 1), (0, 2)]));
        let bad = InitRequest { name: "cost".into(), config: Some(flotilla_pdk::serde_json::json!({"lable": "x"})) };
        assert!(CostAssigner::new(bad).unwrap_err().contains("unknown field"));
    }

    #[test]
    fn handles_divided_without_static_weights_only() {
        let p = |json: &str| flotilla_pdk::serde_json::from_str::<Placement>(json).unwrap();
        assert!(!handles(&p("{}")), "no replicaScheduling: Duplicated");
        assert!(!handles(&p(r#"{"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}"#)));
        assert!(handles(&p(r#"{"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}"#)));
        assert!(handles(&p(r#"{"replicaScheduling": {"weightPreference": {"dynamicWeight": "AvailableReplicas"}}}"#)));
        assert!(!handles(&p(
            r#"{"replicaScheduling": {"replicaSchedulingType": "Divided", "weightPreference": {"staticWeightList": [{"targetCluster": {}, "weight": 1}]}}}"#
        )));
    }
}
