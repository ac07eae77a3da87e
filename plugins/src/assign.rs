//! In-tree assign plugins, one per Karmada replica-division strategy. Each handles only its own
//! strategy and skips otherwise, so a profile may put a custom assigner in front of them.

use flotilla_core::PluginError;
use flotilla_core::division::{self, Strategy};
use flotilla_core::framework::{AssignInput, AssignPlugin, Assignment, Plugin};

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

assigner!(Duplicated, DUPLICATED, "Every selected cluster gets all replicas.", Strategy::Duplicated, division::duplicated);
assigner!(
    StaticWeight,
    STATIC_WEIGHT,
    "Replicas divided by static weights (Webster), Karmada's `staticWeightList`.",
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
