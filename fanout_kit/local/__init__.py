"""Run the synthesized workflows locally on moto's Step Functions interpreter."""
