//! In-tree assign plugins, one per Karmada replica-division strategy. Each handles only its own
//! strategy and skips otherwise, so a profile may put a custom assigner in front of them.

use std::sync::atomic::AtomicI64;

use flotilla_api::policy::StaticClusterWeight;
use flotilla_core::PluginError;
use flotilla_core::division::{self, Strategy};
use flotilla_core::framework::{AssignInput, AssignPlugin, Assignment, Plugin};

use crate::memo::{KeyHash, RowMemo};

/// Name of [`Duplicated`].
pub const DUPLICATED: &str = "Duplicated";
/// Name of [`StaticWeight`].
pub const STATIC_WEIGHT: &str = "StaticWeight";
/// Name of [`DynamicWeight`].
pub const DYNAMIC_WEIGHT: &str = "DynamicWeight";
/// Name of [`Aggregated`].
pub const AGGREGATED: &str = "Aggregated";

fn strategy(input: &AssignInput<'_>) -> Option<Strategy> {
    division::strategy(input.binding.placement).ok()
}

macro_rules! assigner {
    ($ty:ident, $name:ident, $doc:literal, $strategy:path, $run:expr) => {
        #[doc = $doc]
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $ty;

        impl Plugin for $ty {
            fn name(&self) -> &str {
                $name
            }
        }

        impl AssignPlugin for $ty {
            fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError> {
                if strategy(input) != Some($strategy) {
                    return Ok(Assignment::Skip);
                }
                let run: fn(&AssignInput<'_>) -> Assignment = $run;
                Ok(run(input))
            }
        }
    };
}

assigner!(
    Duplicated,
    DUPLICATED,
    "Every selected cluster gets all replicas.",
    Strategy::Duplicated,
    division::duplicated
);
assigner!(
    StaticWeight,
    STATIC_WEIGHT,
    "Replicas divided by static weights (Webster), Karmada's `staticWeightList`. Evaluates the rules \
     for every cluster on every call; the profiles use [`MemoisedStaticWeight`].",
    Strategy::StaticWeight,
    division::static_weight
);
assigner!(
    DynamicWeight,
    DYNAMIC_WEIGHT,
    "Replicas divided by available replicas (`dynamicWeight: AvailableReplicas`), stable on scale up/down.",
    Strategy::DynamicWeight,
    |i| division::dynamic(i, false)
);
assigner!(
    Aggregated,
    AGGREGATED,
    "Replicas packed onto the fewest clusters (minimal prefix), spread proportionally there.",
    Strategy::Aggregated,
    |i| division::dynamic(i, true)
);

/// [`StaticWeight`] with a memo per snapshot generation (as its Wasm build keeps): each snapshot
/// row's weight per distinct `staticWeightList`. Used when the binding has a snapshot; clusters
/// without a snapshot row get their weight computed.
#[derive(Debug, Default)]
pub struct MemoisedStaticWeight {
    memo: RowMemo<Vec<StaticClusterWeight>, AtomicI64>,
}

impl Plugin for MemoisedStaticWeight {
    fn name(&self) -> &str {
        STATIC_WEIGHT
    }
}

impl AssignPlugin for MemoisedStaticWeight {
    fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError> {
        if strategy(input) != Some(Strategy::StaticWeight) {
            return Ok(Assignment::Skip);
        }
        let memo = match (input.binding.snapshot, division::static_weight_rules(input)) {
            (Some(s), Some(rules)) => {
                let mut hash = KeyHash::default();
                // A failed write would leave a partial hash, still the same for equal keys.
                let _ = serde_json::to_writer(&mut hash, rules);
                self.memo
                    .slot(&s, hash.finish(), |k| k == rules, || rules.to_vec())
                    .map(|slot| (s, rules, slot))
            }
            _ => None,
        };
        let Some((s, rules, slot)) = memo else {
            return Ok(division::static_weight(input));
        };
        // On the first row the memo does not know yet, every row's weight from the snapshot's
        // index (`slot.get` computes for rows outside the snapshot too: those one by one).
        let mut weights = None;
        Ok(division::static_weight_with(input, |c| {
            slot.get(s.clusters, c.row, c.cluster, || {
                if !s
                    .clusters
                    .get(c.row as usize)
                    .is_some_and(|r| std::ptr::eq(r, c.cluster))
                {
                    return division::rule_weight(rules, c.cluster);
                }
                let w = weights.get_or_insert_with(|| division::rule_weights(rules, s.index()));
                w.get(c.row as usize)
                    .copied()
                    .unwrap_or_else(|| division::rule_weight(rules, c.cluster))
            })
        }))
    }
}
