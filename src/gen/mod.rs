//! Generators: proptest strategies for the adversarial classes of SPEC
//! section 7, one file per op, and a shrinker that works on shape and values
//! together.

pub mod seqwise_loss;
