/*
 * Cognis Memory's Japanese analysis for OpenSearch: Lucene's kuromoji morphological analyser
 * (lucene-analysis-kuromoji, IPADIC inside), under the names OpenSearch's own analysis-kuromoji
 * plugin gives it. That plugin is not published for OpenSearch 2.19 on Maven Central; Amazon
 * OpenSearch Service and the OpenSearch images offer it. The same names mean the index mapping
 * is the same on either (app/search_index/documents.py).
 */
package org.cognis.analysis.ja;

import java.util.Map;

import org.apache.lucene.analysis.Analyzer;
import org.opensearch.index.analysis.AnalyzerProvider;
import org.opensearch.index.analysis.TokenFilterFactory;
import org.opensearch.index.analysis.TokenizerFactory;
import org.opensearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.opensearch.plugins.AnalysisPlugin;
import org.opensearch.plugins.Plugin;

public final class JapaneseAnalysisPlugin extends Plugin implements AnalysisPlugin {

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of("kuromoji_tokenizer", KuromojiTokenizerFactory::new);
    }

    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return JapaneseFilterFactories.all();
    }

    @Override
    public Map<String, AnalysisProvider<AnalyzerProvider<? extends Analyzer>>> getAnalyzers() {
        return Map.of("kuromoji", KuromojiAnalyzerProvider::new);
    }
}
