"""Stand-in for the parts of populationgenomics/cpg-infrastructure (cpg_infra) that metamist_infrastructure
imports: the plugin base class, archive_folder, get_member_key, the config object. Written for the corpus,
not copied; the real package is not on PyPI."""
